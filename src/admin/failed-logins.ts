import { isIPv6 } from 'node:net';
import { plainAddress } from '../upstream/fields/trust-proxy.js';
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

/** What a client's logins come to, for the audit log. */
export type FailedLoginEvent =
  /** A password was checked and was wrong (or the username unknown); `client` is the peer's address. */
  | { kind: 'failure'; client: string; username: string }
  /**
   * The client (`username` absent: whatever the usernames) or a username from it has no check left for
   * `seconds`: its logins are refused with 429 until then. `client` is what is counted (an IPv6 /64).
   */
  | { kind: 'lockout'; client: string; username?: string; seconds: number };

/** One password check of a client: under way (it holds its place), or failed at `at`. */
interface Check {
  at: number;
  failed: boolean;
}

/** The checks counted together, and how many of them may stand at once. */
interface Book {
  key: string;
  limit: number;
  /** The username the book is of; absent for the client's book of every username. */
  username?: string;
}

/**
 * Guesses at admin passwords, slowed down: a client that has failed `perUserAndClient` times for one
 * username within the window, or `perClient` times for any, gets 429 with Retry-After until its oldest
 * failure leaves the window, before any password is checked (so a right guess is refused too, and the
 * answer tells nothing). Counted per client so that a stranger's guesses never lock the real user out
 * from their own address; IPv6 clients by their /64, which one host can fill with addresses.
 *
 * A check takes its place before it starts, and a failure keeps it: checks started together (a burst of
 * guesses, each waiting for scrypt) are counted before any of them ends, so that no more than the
 * limits ever run. A successful check gives its place back, and forgets no failure: a guesser behind the
 * address of a real user (a NAT, a proxy) would otherwise have its count wiped by every login of theirs.
 */
export class FailedLogins {
  /** The checks of each book under way or failed within the window, oldest first. */
  private readonly books = new Map<string, Check[]>();

  constructor(
    private readonly now: () => number,
    private readonly limits: FailedLoginLimits = failedLoginLimits,
    private readonly report: (event: FailedLoginEvent) => void = () => {},
  ) {}

  /**
   * Runs `check` unless this client (or this username from it) must wait. `check` calls `reserve` just
   * before it checks a password for real (not for a pair it already knows): the place is taken then, or
   * 429 thrown when none is left. A failed check keeps its place for the window; a successful one gives
   * it back.
   */
  async attempt<T>(
    peer: string | undefined,
    username: string,
    check: (reserve: () => void) => Promise<T | null>,
  ): Promise<T | null> {
    const client = clientKey(peer);
    const books: Book[] = [
      { key: client, limit: this.limits.perClient },
      { key: `${client} ${username}`, limit: this.limits.perUserAndClient, username },
    ];
    this.requireRoom(books);
    const reserved: Check[] = [];
    const reserve = () => {
      this.requireRoom(books);
      reserved.push(this.take(books));
    };
    let result: T | null;
    try {
      result = await check(reserve);
    } catch (error) {
      // A check that broke keeps its place as a failure: breaking it must not buy more guesses.
      for (const taken of reserved) taken.failed = true;
      throw error;
    }
    if (result !== null) this.succeeded(books, reserved);
    else for (const taken of reserved) this.failed(books, taken, peer, username);
    return result;
  }

  /** Forgets every failure, so that no client waits any longer (an admin's way to end a lockout): how many. */
  clear(): number {
    const now = this.now();
    const failures = new Set(
      [...this.books.keys()].flatMap((key) => this.standing(key, now)).filter((check) => check.failed),
    );
    this.books.clear();
    return failures.size;
  }

  /** Throws 429 when a book has no place left. */
  private requireRoom(books: Book[]): void {
    const now = this.now();
    const waitMs = Math.max(...books.map((book) => this.waitMs(book, now)));
    if (waitMs <= 0) return;
    const seconds = Math.ceil(waitMs / 1000);
    throw new AdminError(429, [`too many failed logins from this client: try again in ${seconds} s`], {
      'retry-after': String(seconds),
    });
  }

  /** The checks of a book that still hold a place: those under way, and failures within the window. */
  private standing(key: string, now: number): Check[] {
    return (this.books.get(key) ?? []).filter(
      (check) => !check.failed || check.at + this.limits.windowMs > now,
    );
  }

  /**
   * How long a book has no place left: until enough of its failures leave the window. Checks under way
   * end within moments; while they alone fill the book, a second.
   */
  private waitMs(book: Book, now: number): number {
    const standing = this.standing(book.key, now);
    if (standing.length < book.limit) return 0;
    const failures = standing.filter((check) => check.failed);
    const freeing = failures[standing.length - book.limit];
    return freeing === undefined ? 1000 : freeing.at + this.limits.windowMs - now;
  }

  private take(books: Book[]): Check {
    const now = this.now();
    const check: Check = { at: now, failed: false };
    for (const { key } of books) {
      const standing = this.standing(key, now);
      standing.push(check);
      // Map order is insertion order, and a book that checks is inserted again: the first is the stalest.
      this.books.delete(key);
      this.books.set(key, standing);
    }
    while (this.books.size > this.limits.maxKeys) this.books.delete(this.books.keys().next().value!);
    return check;
  }

  private succeeded(books: Book[], reserved: Check[]): void {
    for (const { key } of books) {
      const kept = (this.books.get(key) ?? []).filter((check) => !reserved.includes(check));
      if (kept.length > 0) this.books.set(key, kept);
      else this.books.delete(key);
    }
  }

  private failed(books: Book[], check: Check, peer: string | undefined, username: string): void {
    check.failed = true;
    this.report({ kind: 'failure', client: peer === undefined ? 'unknown' : plainAddress(peer), username });
    const now = this.now();
    for (const book of books) {
      const failures = this.standing(book.key, now).filter((standing) => standing.failed);
      // The failure that fills a book starts a lockout (a later one renews it once the oldest has left).
      if (failures.length !== book.limit) continue;
      const seconds = Math.ceil(this.waitMs(book, now) / 1000);
      this.report({
        kind: 'lockout',
        client: books[0]!.key,
        ...(book.username === undefined ? {} : { username: book.username }),
        seconds,
      });
    }
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
