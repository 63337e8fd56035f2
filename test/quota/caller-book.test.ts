import { describe, expect, it } from 'vitest';
import { CallerBook, overflowCaller } from '../../src/quota/caller-book.js';

const minute = 60_000;

describe('the callers a restriction counts apart', () => {
  it('counts a flood of new callers beyond the capacity together, and never drops a caller it holds', () => {
    const clock = { now: 0 };
    const book = new CallerBook(() => clock.now, 3);
    expect(['a', 'b', 'c'].map((caller) => book.counted('r', caller, minute))).toEqual(['a', 'b', 'c']);
    for (let i = 0; i < 1000; i += 1) {
      clock.now += 10;
      expect(book.counted('r', `flood ${i}`, minute)).toBe(overflowCaller);
    }
    expect(['a', 'b', 'c'].map((caller) => book.counted('r', caller, minute))).toEqual(['a', 'b', 'c']);
    // Usage reads where a request would be counted, holding nothing.
    expect([book.countedAs('r', 'a'), book.countedAs('r', 'new')]).toEqual(['a', overflowCaller]);
    expect(book.countedAs('other', 'new')).toBe('new');
    // Another restriction has room of its own.
    expect(book.counted('other', 'flood 1', minute)).toBe('flood 1');
  });

  it('makes room only from callers idle for a whole window, whose counts have expired', () => {
    const clock = { now: 0 };
    const book = new CallerBook(() => clock.now, 2);
    book.counted('r', 'a', minute);
    clock.now = 30_000;
    book.counted('r', 'b', minute);
    clock.now = 59_000;
    expect(book.counted('r', 'c', minute)).toBe(overflowCaller);
    clock.now = 61_000;
    expect(book.counted('r', 'c', minute)).toBe('c');
    expect(book.counted('r', 'b', minute)).toBe('b');
    expect(book.counted('r', 'd', minute)).toBe(overflowCaller);
  });

  it('holds the callers of a restriction without a window (concurrency) for a minute at least', () => {
    const clock = { now: 0 };
    const book = new CallerBook(() => clock.now, 1);
    book.counted('r', 'a', 0);
    clock.now = 59_999;
    expect(book.counted('r', 'b', 0)).toBe(overflowCaller);
    clock.now = 61_000;
    expect(book.counted('r', 'b', 0)).toBe('b');
  });
});
