import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { CredentialCache } from '../auth/credential-cache.js';
import { parseBasicCredentials } from '../auth/basic-credentials.js';
import type { Config } from '../config/schema.js';
import { hashPassword, isPasswordHash, verifyPassword } from '../kit/password-hash.js';

export type AdminRole = 'admin' | 'member';

export interface AdminUser {
  username: string;
  role: AdminRole;
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * Checks HTTP basic credentials against `admin.users`. Passwords are scrypt hashes (plain text is
 * allowed outside production); a verified pair is remembered for five minutes so that scrypt's cost is
 * paid once per session, not once per request. An unknown user costs a hash check too, so timing does
 * not tell which usernames exist.
 */
export class AdminUsers {
  private readonly users: Map<string, Config['admin']['users'][number]>;
  private readonly verified = new CredentialCache<AdminUser>({ max: 100, ttlMs: 5 * 60_000 });
  private readonly decoy = hashPassword('decoy password');

  constructor(users: Config['admin']['users']) {
    this.users = new Map(users.map((user) => [user.username, user]));
  }

  /**
   * The username and password of the request's HTTP basic credentials, or null. A request with more than
   * one Authorization field has none whatever they hold: Node keeps only the first in `req.headers`, and
   * a proxy in front may have judged by another one (RFC 9110 §5.3: Authorization is not a list, so two
   * are an error).
   */
  static credentialsOf(req: IncomingMessage): { username: string; password: string } | null {
    if ((req.headersDistinct.authorization?.length ?? 0) > 1) return null;
    const header = req.headers.authorization;
    return typeof header === 'string' ? parseBasicCredentials(header) : null;
  }

  /**
   * The user of this name and password (a login form's), or null. A pair verified before, or being
   * verified now for another request, is answered without a check of its own; `beforeCheck` is called,
   * synchronously, only before a password is checked for real (it may refuse, by throwing).
   */
  verify(username: string, password: string, beforeCheck: () => void): Promise<AdminUser | null> {
    if (password === '') return Promise.resolve(null);
    return this.verified.resolve(username, password, async () => {
      beforeCheck();
      const user = this.users.get(username);
      const stored = user?.password ?? (await this.decoy);
      const matches = isPasswordHash(stored)
        ? await verifyPassword(password, stored)
        : timingSafeEqual(digest(password), digest(stored));
      return user && matches ? { username, role: user.role } : null;
    });
  }

  /** The users as the config declares them. */
  entries(): Array<Config['admin']['users'][number]> {
    return [...this.users.values()];
  }

  /** The user of this name as the config has it now (a session's user may have been removed). */
  current(username: string): AdminUser | null {
    const user = this.users.get(username);
    return user ? { username, role: user.role } : null;
  }
}
