import { createHmac, randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { systemClock } from '../kit/clock.js';

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
  /** Verifications under way, by the key of their pair. */
  private readonly pending = new Map<string, Promise<V | null>>();

  constructor(options: CredentialCacheOptions) {
    const now = options.now ?? systemClock.monotonic;
    this.entries = new LRUCache({ max: options.max, ttl: options.ttlMs, perf: { now } });
  }

  get(username: string, password: string): V | undefined {
    return this.entries.get(this.key(username, password));
  }

  set(username: string, password: string, value: V): void {
    this.entries.set(this.key(username, password), value);
  }

  /**
   * What this pair yields: its remembered value, else the verification of the same pair already under
   * way, else `verify()`'s, started now and remembered when it yields a value. Requests that bring one
   * pair at once share one verification.
   */
  resolve(username: string, password: string, verify: () => Promise<V | null>): Promise<V | null> {
    const key = this.key(username, password);
    const remembered = this.entries.get(key);
    if (remembered) return Promise.resolve(remembered);
    const pending = this.pending.get(key);
    if (pending) return pending;
    const verified = verify()
      .then((value) => {
        if (value) this.entries.set(key, value);
        return value;
      })
      .finally(() => this.pending.delete(key));
    this.pending.set(key, verified);
    return verified;
  }

  private key(username: string, password: string): string {
    return `${username}\u0000${createHmac('sha256', this.secret).update(password, 'utf8').digest('base64')}`;
  }
}
