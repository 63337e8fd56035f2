import { describe, expect, it } from 'vitest';
import { CallerBook, overflowCaller, overflowOf } from '../../src/quota/caller-book.js';

const minute = 60_000;

/** A book on a clock the test moves, with small bounds. */
function bookWith(perApplication: number, shared = 1_000, most = 2_000) {
  const clock = { now: 0 };
  return { clock, book: new CallerBook(() => clock.now, { perApplication, shared, most }) };
}

describe('the callers a restriction counts apart', () => {
  it('counts a flood of new callers beyond the capacity together, and never drops a caller it holds', () => {
    const { clock, book } = bookWith(3);
    const counted = (caller: string) => book.counted('r', 'app', caller, minute);
    expect(['a', 'b', 'c'].map(counted)).toEqual(['a', 'b', 'c']);
    for (let i = 0; i < 1000; i += 1) {
      clock.now += 10;
      expect(counted(`flood ${i}`)).toBe(overflowOf('app'));
    }
    expect(['a', 'b', 'c'].map(counted)).toEqual(['a', 'b', 'c']);
    // Usage reads where a request would be counted, holding nothing.
    expect([book.countedAs('r', 'app', 'a'), book.countedAs('r', 'app', 'new')]).toEqual([
      'a',
      overflowOf('app'),
    ]);
    expect(book.countedAs('other', 'app', 'new')).toBe('new');
    // Another restriction has room of its own.
    expect(book.counted('other', 'app', 'flood 1', minute)).toBe('flood 1');
  });

  it("keeps a book per application: one application's flood leaves another its own room and overflow", () => {
    const { book } = bookWith(3);
    for (let i = 0; i < 100; i += 1) book.counted('r', 'mobile', `m${i}`, minute);
    expect(book.counted('r', 'mobile', 'm-new', minute)).toBe(overflowOf('mobile'));
    expect(['w1', 'w2', 'w3'].map((caller) => book.counted('r', 'web', caller, minute))).toEqual([
      'w1',
      'w2',
      'w3',
    ]);
    expect(book.counted('r', 'web', 'w4', minute)).toBe(overflowOf('web'));
    // Public requests share one book, whose overflow is the public one.
    for (let i = 0; i < 3; i += 1) book.counted('r', undefined, `p${i}`, minute);
    expect(book.counted('r', undefined, 'p-new', minute)).toBe(overflowCaller);
    expect(new Set([overflowOf('mobile'), overflowOf('web'), overflowCaller]).size).toBe(3);
  });

  it('holds the books to a fair share of the whole past the shared bound, and never past the most', () => {
    // 10 per application; 20 in all as they come, then fewer than a fair share of 20 each; 40 at most.
    const { book } = bookWith(10, 20, 40);
    const overflows = (application: string, count: number) =>
      Array.from({ length: count }, (_, i) =>
        book.counted('r', application, `${application} ${i}`, minute),
      ).filter((caller) => caller === overflowOf(application)).length;
    // Two applications flood first and take the 20 shared.
    expect([overflows('a', 10), overflows('b', 10)]).toEqual([0, 0]);
    // The next ones still get fewer than their fair share: 7 (20 ÷ 3 books), 5 (÷ 4), 4 (÷ 5), 4 (÷ 6).
    expect([overflows('c', 8), overflows('d', 6), overflows('e', 6), overflows('f', 6)]).toEqual([
      1, 1, 2, 2,
    ]);
    // 40 are held: the most. Nobody new gets a caller counted apart until some are idle.
    expect(overflows('g', 3)).toBe(3);
    expect(book.countedAs('r', 'h', 'h 0')).toBe(overflowOf('h'));
    expect(book.countedAs('r', 'a', 'a 0')).toBe('a 0');
  });

  it('makes room in the whole from the idle callers of every book, at most once a second', () => {
    const { clock, book } = bookWith(10, 4, 4);
    for (let i = 0; i < 4; i += 1) book.counted('r', 'a', `a${i}`, minute);
    expect(book.counted('r', 'b', 'b0', minute)).toBe(overflowOf('b'));
    clock.now = 61_000;
    book.counted('r', 'a', 'a0', minute);
    // a1–a3 have been idle for a window: they make room for b.
    expect(book.counted('r', 'b', 'b0', minute)).toBe('b0');
    expect(book.counted('r', 'b', 'b1', minute)).toBe('b1');
    expect(book.counted('r', 'b', 'b2', minute)).toBe('b2');
    expect(book.counted('r', 'c', 'c0', minute)).toBe(overflowOf('c'));
  });

  it('makes room only from callers idle for a whole window, whose counts have expired', () => {
    const { clock, book } = bookWith(2);
    book.counted('r', 'app', 'a', minute);
    clock.now = 30_000;
    book.counted('r', 'app', 'b', minute);
    clock.now = 59_000;
    expect(book.counted('r', 'app', 'c', minute)).toBe(overflowOf('app'));
    clock.now = 61_000;
    expect(book.counted('r', 'app', 'c', minute)).toBe('c');
    expect(book.counted('r', 'app', 'b', minute)).toBe('b');
    expect(book.counted('r', 'app', 'd', minute)).toBe(overflowOf('app'));
  });

  it('holds the callers of a restriction without a window (concurrency) for a minute at least', () => {
    const { clock, book } = bookWith(1);
    book.counted('r', 'app', 'a', 0);
    clock.now = 59_999;
    expect(book.counted('r', 'app', 'b', 0)).toBe(overflowOf('app'));
    clock.now = 61_000;
    expect(book.counted('r', 'app', 'b', 0)).toBe('b');
  });

  it('tells a long caller from another by its whole text', () => {
    const { book } = bookWith(2);
    const long = (letter: string) => `\nvalue ${'x'.repeat(16_000)}${letter}`;
    expect([long('a'), long('b')].map((caller) => book.counted('r', 'app', caller, minute))).toEqual([
      long('a'),
      long('b'),
    ]);
    expect(book.counted('r', 'app', long('a'), minute)).toBe(long('a'));
    expect(book.counted('r', 'app', long('c'), minute)).toBe(overflowOf('app'));
  });
});
