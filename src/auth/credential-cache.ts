import { createHmac, randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';

export interface CredentialCacheOptions {
  max: number;
  ttlMs: number;
  /** Milliseconds from a monotonic clock; tests move it instead of sleeping. */
  now?: () => number;
}

/**
 * Remembers what a verified username and password pair yielded, for a while. The key is the username
 * with a keyed hash (HMAC, per-process secret) of the password: the password itself is never kept, and a
 * wrong password is a different key, so it is always checked for real.
 */
export class CredentialCache<V extends object> {
  private readonly secret = randomBytes(32);
  private readonly entries: LRUCache<string, V>;

  constructor(options: CredentialCacheOptions) {
    const now = options.now ?? (() => performance.now());
    this.entries = new LRUCache({ max: options.max, ttl: options.ttlMs, perf: { now } });
  }

  get(username: string, password: string): V | undefined {
    return this.entries.get(this.key(username, password));
  }

  set(username: string, password: string, value: V): void {
    this.entries.set(this.key(username, password), value);
  }

  private key(username: string, password: string): string {
    return `${username}\u0000${createHmac('sha256', this.secret).update(password, 'utf8').digest('base64')}`;
  }
}
