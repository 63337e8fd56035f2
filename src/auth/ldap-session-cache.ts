import { LRUCache } from 'lru-cache';
import { systemClock } from '../kit/clock.js';
import { CredentialCache } from './credential-cache.js';

export interface LdapSessionCacheOptions {
  /** Sessions kept at most: one per directory entry and password. */
  maxSessions: number;
  /** Spellings of usernames remembered at most, each with the DN of the entry it found. */
  maxSpellings: number;
  /** How long a session and a spelling are remembered, in milliseconds. */
  ttlMs: number;
  /** Milliseconds from a monotonic clock; tests move it instead of sleeping. */
  now?: () => number;
}

// Spellings are remembered as typed; this caps the memory they take (in UTF-16 code units) whatever
// their length.
const maxSpellingChars = 1 << 20;

/**
 * The sessions of `ldap.cache: true`, one per directory entry and password, whatever spelling of the
 * username found the entry. The directory matches `alice`, `ALICE` and ` alice` to one entry; each
 * spelling it has matched in a successful login is remembered with that entry's DN, and sessions are
 * keyed by the DN with an HMAC of the password (see CredentialCache). So ten spellings of one user are
 * one session, a spelling never seen goes to the directory, a spelling only ever yields the entry the
 * directory found for it, and a wrong password is a different key, so it always goes to the directory.
 */
export class LdapSessionCache<V extends object> {
  private readonly spellings: LRUCache<string, string>;
  private readonly sessions: CredentialCache<V>;

  constructor(options: LdapSessionCacheOptions) {
    const now = options.now ?? systemClock.monotonic;
    this.spellings = new LRUCache({
      max: options.maxSpellings,
      ttl: options.ttlMs,
      perf: { now },
      maxSize: maxSpellingChars,
      sizeCalculation: (dn, spelling) => spelling.length + dn.length || 1,
    });
    this.sessions = new CredentialCache({ max: options.maxSessions, ttlMs: options.ttlMs, now });
  }

  /** What a login of this spelling and password yielded, if the session is still remembered. */
  get(username: string, password: string): V | undefined {
    const dn = this.spellings.get(username);
    return dn === undefined ? undefined : this.sessions.get(dn, password);
  }

  /** Remembers a login the directory accepted: `username` found the entry `dn`, which `password` binds. */
  set(username: string, dn: string, password: string, value: V): void {
    this.spellings.set(username, dn);
    this.sessions.set(dn, password, value);
  }
}
