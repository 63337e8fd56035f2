import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LRUCache } from 'lru-cache';

/** The cookie of a login session: the name Axway API Manager gives it, which its clients expect. */
export const sessionCookie = 'APIMANAGERSESSION';

export interface AdminSession {
  id: string;
  username: string;
  /** Sent back in the `CSRF-Token` field of every request that changes something. */
  csrfToken: string;
}

const idleMs = 30 * 60_000;
/** Sessions one user may hold: more logins end that user's oldest, never another user's. */
const sessionsPerUser = 10;

/**
 * Login sessions of the admin API, for clients written for Axway API Manager (apim-cli): `POST /login`
 * with a form opens one, its cookie and `CSRF-Token` authenticate what follows, `DELETE /login` closes
 * it. A session ends after 30 minutes without a request; a user holds at most 10 (a new login ends
 * their oldest) and the gateway at most 1,000, so no user can log others out by logging in again and
 * again (that would take 100 users).
 */
export class AdminSessions {
  private readonly sessions = new LRUCache<string, AdminSession>({
    max: 1_000,
    ttl: idleMs,
    updateAgeOnGet: true,
  });

  open(username: string): AdminSession {
    const own = [...this.sessions.values()].filter((session) => session.username === username);
    // LRU order: the least recently used of the user's sessions come last.
    for (const old of own.slice(sessionsPerUser - 1)) this.sessions.delete(old.id);
    const session = {
      id: randomBytes(32).toString('base64url'),
      username,
      csrfToken: randomBytes(24).toString('base64url'),
    };
    this.sessions.set(session.id, session);
    return session;
  }

  /** The session whose cookie the request carries, or null. */
  of(req: IncomingMessage): AdminSession | null {
    const id = cookieValue(req.headers.cookie, sessionCookie);
    return id ? (this.sessions.get(id) ?? null) : null;
  }

  close(session: AdminSession): void {
    this.sessions.delete(session.id);
  }

  /** Ends every session of `username` (their password or role changed, or they were removed). */
  endFor(username: string): void {
    for (const session of [...this.sessions.values()])
      if (session.username === username) this.sessions.delete(session.id);
  }

  /** Whether the request's `CSRF-Token` is the session's. */
  static csrfMatches(req: IncomingMessage, session: AdminSession): boolean {
    const given = req.headers['csrf-token'];
    if (typeof given !== 'string') return false;
    const [a, b] = [Buffer.from(given), Buffer.from(session.csrfToken)];
    return a.length === b.length && timingSafeEqual(a, b);
  }

  /**
   * The Set-Cookie value of a session (null: the one that ends it). `Secure` when the admin listener
   * serves HTTPS; over plain HTTP a Secure cookie would never come back from clients such as apim-cli.
   */
  static cookieFor(session: AdminSession | null, secure: boolean): string {
    const flags = `Path=/api/portal; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
    return session ? `${sessionCookie}=${session.id}; ${flags}` : `${sessionCookie}=; ${flags}; Max-Age=0`;
  }
}

/**
 * The value of the one cookie `name`, or null. Two of that name are none: cookies ignore ports, so a
 * page on another port of this host could plant a second one, and which of them a server reads first
 * is not something to bet a session on.
 */
function cookieValue(header: string | undefined, name: string): string | null {
  if (!header) return null;
  let found: string | null = null;
  for (const pair of header.split(';')) {
    const at = pair.indexOf('=');
    if (at === -1 || pair.slice(0, at).trim() !== name) continue;
    if (found !== null) return null;
    found = pair.slice(at + 1).trim();
  }
  return found || null;
}
