import { createHmac, randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Principal } from './authenticator.js';

const maxSessions = 100;
const sessionTtlMs = 5 * 60_000;

/**
 * The LDAP `cache: true` sessions: at most 100, for five minutes each. The key is the username with a
 * keyed hash (HMAC, per-process secret) of the password: the password itself is never kept, and a wrong
 * password is a different key, so it is always checked against the directory.
 */
export class LdapSessionCache {
  private readonly secret = randomBytes(32);
  private readonly sessions: LRUCache<string, Principal>;

  /** @param now milliseconds from a monotonic clock; tests move it instead of sleeping. */
  constructor(now: () => number = () => performance.now()) {
    this.sessions = new LRUCache({ max: maxSessions, ttl: sessionTtlMs, perf: { now } });
  }

  get(username: string, password: string): Principal | undefined {
    return this.sessions.get(this.key(username, password));
  }

  set(username: string, password: string, principal: Principal): void {
    this.sessions.set(this.key(username, password), principal);
  }

  private key(username: string, password: string): string {
    return `${username}\u0000${createHmac('sha256', this.secret).update(password, 'utf8').digest('base64')}`;
  }
}
