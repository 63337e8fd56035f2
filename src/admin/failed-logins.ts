import { isIPv6 } from 'node:net';
import { plainAddress } from '../gateway/proxy/trust-proxy.js';
import { AdminError } from './admin-errors.js';

export interface FailedLoginLimits {
  /** Failed checks of one username from one client within `windowMs` before it waits. */
  perUserAndClient: number;
  /** Failed checks from one client, whatever the usernames, within `windowMs` before it waits. */
  perClient: number;
  windowMs: number;
  /** Clients (and usernames of clients) remembered at once; the least recently failing are forgotten. */
  maxKeys: number;
}

export const failedLoginLimits: FailedLoginLimits = {
  perUserAndClient: 5,
  perClient: 30,
  windowMs: 15 * 60_000,
  maxKeys: 10_000,
};

/**
 * Guesses at admin passwords, slowed down: a client that has failed `perUserAndClient` times for one
 * username within the window, or `perClient` times for any, gets 429 with Retry-After until its oldest
 * failure leaves the window, before any password is checked (so a right guess is refused too, and the
 * answer tells nothing). Counted per client so that a stranger's guesses never lock the real user out
 * from their own address; IPv6 clients by their /64, which one host can fill with addresses.
 */
export class FailedLogins {
  /** Failure times per key, oldest first, at most the key's limit of them. */
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly now: () => number,
    private readonly limits: FailedLoginLimits = failedLoginLimits,
  ) {}

  /** Runs `check` unless this client (or this username from it) must wait; counts it when it fails. */
  async attempt<T>(
    peer: string | undefined,
    username: string,
    check: () => Promise<T | null>,
  ): Promise<T | null> {
    const client = clientKey(peer);
    const userKey = `${client} ${username}`;
    const now = this.now();
    const waitMs = Math.max(
      this.waitMs(client, this.limits.perClient, now),
      this.waitMs(userKey, this.limits.perUserAndClient, now),
    );
    if (waitMs > 0) {
      const seconds = Math.ceil(waitMs / 1000);
      throw new AdminError(429, [`too many failed logins from this client: try again in ${seconds} s`], {
        'retry-after': String(seconds),
      });
    }
    const result = await check();
    if (result === null) {
      this.record(client, this.limits.perClient, now);
      this.record(userKey, this.limits.perUserAndClient, now);
    } else this.failures.delete(userKey);
    return result;
  }

  private waitMs(key: string, limit: number, now: number): number {
    const times = this.failures.get(key);
    if (!times || times.length < limit) return 0;
    return Math.max(0, times[times.length - limit]! + this.limits.windowMs - now);
  }

  private record(key: string, limit: number, now: number): void {
    const times = this.failures.get(key) ?? [];
    this.failures.delete(key);
    times.push(now);
    if (times.length > limit) times.splice(0, times.length - limit);
    this.failures.set(key, times);
    // Map order is insertion order, and a failing key is inserted again: the first is the stalest.
    if (this.failures.size > this.limits.maxKeys) this.failures.delete(this.failures.keys().next().value!);
  }
}

/** The client a failure counts against: its address, or for IPv6 its /64. */
function clientKey(peer: string | undefined): string {
  if (peer === undefined) return 'unknown';
  const address = plainAddress(peer);
  if (!isIPv6(address)) return address;
  const groups = expandIPv6(address);
  return `${groups.slice(0, 4).join(':')}::/64`;
}

/** The eight groups of an IPv6 address, `::` expanded. */
function expandIPv6(address: string): string[] {
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? [] : new Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((group) => group.replace(/^0+(?=.)/, ''));
}
