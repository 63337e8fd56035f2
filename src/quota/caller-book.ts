import { createHash } from 'node:crypto';

/** How many callers the books hold: per application and restriction, and in all. */
export interface CallerBounds {
  /** Callers one application (or the public requests) counts apart under one restriction. */
  perApplication: number;
  /** Callers all the books may hold before each is held to its fair share of them. */
  shared: number;
  /** Callers all the books hold at most. */
  most: number;
}

/** One application's callers under one restriction: made with its first caller, dropped with its last. */
interface Book {
  /** Each caller held (its key: see `keyOf`) and when it was last counted. */
  readonly callers: Map<string, number>;
  /** The caller every caller of this application beyond the room is counted as. */
  readonly overflow: string;
  /** How long the restriction's counts last (its window), for the sweeps. */
  readonly idleMs: number;
  /** The books of its restriction, and its name there (its application, '' for public requests). */
  readonly shelf: Map<string, Book>;
  readonly name: string;
  /** When it was last searched for idle callers: at most once per `sweepEveryMs`. */
  sweptAt: number;
}

/**
 * Which callers each restriction counted `by` caller counts apart, so that memory stays bounded whatever
 * the number of client addresses, header values or applications, and a flood of new callers cannot take
 * room from the callers already counted, nor from another application's (see docs/quotas.md, "Counting by
 * caller"):
 * - a restriction keeps a book per application (the public requests, which have none, share one); a
 *   book holds at most `perApplication` callers, each from its first request until it has been idle for
 *   the restriction's window (at least `leastIdleMs`), when its counter has expired too;
 * - the books hold `shared` callers in all as they come; past that, a book takes a new caller only while
 *   it holds fewer than its fair share (`shared` ÷ the books), and never past `most` in all, so that
 *   many applications flooding together cannot lock the others out, nor grow memory;
 * - a new caller that finds no room is counted on its application's overflow count (one per restriction
 *   and application), shared by every caller of that application beyond the room: it gets the
 *   restriction's limit together with them, then 429;
 * - a held caller is never dropped to make room, so its count is never evicted or reset.
 */
export class CallerBook {
  /** The books of each restriction (its counter prefix), by application. */
  private readonly shelves = new Map<string, Map<string, Book>>();
  /** The books, every one holding a caller, and the callers they hold in all. */
  private books = 0;
  private held = 0;
  /** When all the books were last searched for idle callers: at most once per `sweepEveryMs`. */
  private sweptAllAt = -Infinity;

  constructor(
    private readonly now: () => number,
    private readonly bounds: CallerBounds = callerBounds,
  ) {}

  /**
   * The caller to count a request of `caller` on: `caller` itself when its book holds it or has room for
   * it, else its application's overflow caller.
   * @param restriction the restriction's counter prefix
   * @param application the request's application, undefined for a public request
   * @param idleMs how long the restriction's counts last (its window)
   */
  counted(restriction: string, application: string | undefined, caller: string, idleMs: number): string {
    const now = this.now();
    const key = keyOf(caller);
    const name = application ?? '';
    let shelf = this.shelves.get(restriction);
    if (!shelf) this.shelves.set(restriction, (shelf = new Map()));
    let book = shelf.get(name);
    if (book?.callers.has(key)) {
      book.callers.set(key, now);
      return caller;
    }
    if (!this.hasRoom(book) && !this.madeRoom(book, now)) return book?.overflow ?? overflowOf(application);
    // A sweep may have dropped the book with its last caller.
    book = shelf.get(name);
    if (!book) {
      book = {
        callers: new Map(),
        overflow: overflowOf(application),
        idleMs,
        shelf,
        name,
        sweptAt: -Infinity,
      };
      shelf.set(name, book);
      this.books += 1;
    }
    book.callers.set(key, now);
    this.held += 1;
    return caller;
  }

  /** The caller a request of `caller` would be counted on, as `counted` says, without holding it. */
  countedAs(restriction: string, application: string | undefined, caller: string): string {
    const book = this.shelves.get(restriction)?.get(application ?? '');
    if (book?.callers.has(keyOf(caller)) || this.hasRoom(book)) return caller;
    return book?.overflow ?? overflowOf(application);
  }

  /** Whether `book` (undefined: one not made yet) may take a new caller now. */
  private hasRoom(book: Book | undefined): boolean {
    const { perApplication, shared, most } = this.bounds;
    const size = book?.callers.size ?? 0;
    if (size >= perApplication) return false;
    if (this.held < shared) return true;
    return this.held < most && size < shared / (this.books + (book ? 0 : 1));
  }

  /**
   * Drops idle callers where they stand in the way, at most once a second each: those of `book` when it
   * is full, else those of every book (the whole is full). Whether that made room for a new caller.
   */
  private madeRoom(book: Book | undefined, now: number): boolean {
    if (book && book.callers.size >= this.bounds.perApplication) {
      if (now - book.sweptAt < sweepEveryMs) return false;
      this.sweep(book, now);
    } else {
      if (now - this.sweptAllAt < sweepEveryMs) return false;
      this.sweptAllAt = now;
      for (const shelf of this.shelves.values()) for (const other of shelf.values()) this.sweep(other, now);
    }
    return this.hasRoom(book?.callers.size === 0 ? undefined : book);
  }

  /** Drops the callers of `book` idle for longer than its window, and the book once it holds none. */
  private sweep(book: Book, now: number): void {
    book.sweptAt = now;
    const before = book.callers.size;
    const idleSince = now - Math.max(book.idleMs, leastIdleMs);
    for (const [caller, lastSeen] of book.callers) if (lastSeen <= idleSince) book.callers.delete(caller);
    this.held -= before - book.callers.size;
    if (book.callers.size === 0) {
      book.shelf.delete(book.name);
      this.books -= 1;
    }
  }
}

/**
 * The gateway's bounds: 10,000 callers per restriction and application, 30,000 in all before each book
 * is held to its fair share, 50,000 at most: about 15 MB of books, and as many counters, whose 1.7 KB
 * each stay within the default `store.maxCounterMemoryMb` (128).
 */
export const callerBounds: CallerBounds = { perApplication: 10_000, shared: 30_000, most: 50_000 };

/** The caller the callers of `application` beyond the room are counted as: no address or value spells it. */
export const overflowOf = (application: string | undefined): string =>
  application === undefined ? overflowCaller : `${overflowCaller} ${application}`;

/** The overflow caller of public requests, and the start of every application's. */
export const overflowCaller = 'overflow';

/** A caller held by its text when short, else by a digest: a header value may be 16 KiB long. */
function keyOf(caller: string): string {
  // A digest holds no line break, and every caller the gateway names does (`<scope>\n<caller>`).
  return caller.length <= longestKept ? caller : createHash('sha1').update(caller).digest('base64');
}

const longestKept = 64;
/** Concurrency restrictions have no window: their callers are held at least this long. */
const leastIdleMs = 60_000;
const sweepEveryMs = 1_000;
