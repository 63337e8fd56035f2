import { describe, expect, it } from 'vitest';
import {
  rangeProblems,
  UsageBook,
  UsageCalendar,
  UsageHistoryFlush,
  type UsageRow,
} from '../../src/quota/usage-history.js';
import { FakeClock } from '../helpers/fake-clock.js';

const at = (iso: string) => Date.parse(iso);

describe('the calendar of the usage history', () => {
  it('names the UTC day, and ends it at the next midnight', () => {
    const utc = new UsageCalendar('UTC');
    expect(utc.dayOf(at('2026-11-30T23:59:59.999Z'))).toBe('2026-11-30');
    expect(utc.endOfDay(at('2026-11-30T12:00:00Z'))).toBe(at('2026-12-01T00:00:00Z'));
  });

  it("counts a time zone's day, 23 hours long on the day its clocks go forward", () => {
    const paris = new UsageCalendar('Europe/Paris');
    // 2026-03-29 starts at 23:00 UTC the day before and ends at 22:00 UTC (clocks go from 2:00 to 3:00).
    expect(paris.dayOf(at('2026-03-28T23:00:00Z'))).toBe('2026-03-29');
    expect(paris.dayOf(at('2026-03-28T22:59:59.999Z'))).toBe('2026-03-28');
    expect(paris.endOfDay(at('2026-03-29T01:00:00Z'))).toBe(at('2026-03-29T22:00:00Z'));
  });
});

describe('the range of days asked of the history', () => {
  it('takes dates in order, within the days kept', () => {
    expect(rangeProblems('2026-11-01', '2026-11-30', 400)).toEqual([]);
    expect(rangeProblems('2026-11-01', '2026-11-30', 30)).toEqual([]);
    expect(rangeProblems('2026-11-01', '2026-11-30', 29)).toEqual([
      'to: 30 days asked, but the history keeps 29 (usageHistory.days)',
    ]);
    expect(rangeProblems('2026-11-02', '2026-11-01', 400)).toEqual([
      'from: 2026-11-02 is later than to (2026-11-01)',
    ]);
    expect(rangeProblems('2026-02-30', 'november', 400)).toEqual([
      "from: '2026-02-30' is not a date as YYYY-MM-DD",
      "to: 'november' is not a date as YYYY-MM-DD",
    ]);
  });
});

describe('the book of the usage history', () => {
  it('keeps a line from one flush to the next, so that a request on it allocates nothing', () => {
    const clock = new FakeClock(at('2026-11-30T10:00:00Z'));
    const book = new UsageBook(new UsageCalendar('UTC'), clock.now);
    const line = book.line('app', 'api', 'm');
    line.admitted += 2;
    expect(book.line('app', 'api', 'm')).toBe(line);
    expect(book.take()).toEqual([
      {
        date: '2026-11-30',
        application: 'app',
        api: 'api',
        method: 'm',
        admitted: 2,
        refused: 0,
        bytesIn: 0,
        bytesOut: 0,
        units: 0,
      },
    ]);
    // Zeroed and kept while it counts; dropped after a flush in which it counted nothing.
    expect(book.line('app', 'api', 'm')).toBe(line);
    expect(book.take()).toEqual([]);
    expect(book.line('app', 'api', 'm')).not.toBe(line);
  });

  it('puts what was counted before midnight in the day that ended, even when flushed after it', () => {
    const clock = new FakeClock(at('2026-11-30T23:59:59.500Z'));
    const book = new UsageBook(new UsageCalendar('UTC'), clock.now);
    book.line(null, 'api', null).refused += 1;
    clock.time = at('2026-12-01T00:00:00.200Z');
    book.line(null, 'api', null).refused += 3;
    expect(book.take().map((row) => [row.date, row.application, row.method, row.refused])).toEqual([
      ['2026-11-30', null, null, 1],
      ['2026-12-01', null, null, 3],
    ]);
  });
});

describe('the flush of the usage history', () => {
  it('writes once a second, keeps the lines of a failed write for the next, and writes the rest on close', async () => {
    const clock = new FakeClock(at('2026-11-30T10:00:00Z'));
    const book = new UsageBook(new UsageCalendar('UTC'), clock.now);
    const written: UsageRow[][] = [];
    let failing = true;
    const failures: number[] = [];
    const flush = new UsageHistoryFlush({
      book,
      timers: clock,
      write: async (rows) => {
        if (failing) throw new Error('store down');
        written.push([...rows]);
      },
      onError: (_error, rows) => failures.push(rows),
    });
    book.line('app', 'api', 'm').admitted += 1;
    await clock.advance(999);
    expect(failures).toEqual([]);
    await clock.advance(1);
    expect(failures).toEqual([1]);
    failing = false;
    book.line('app', 'api', 'm').admitted += 1;
    await clock.advance(1_000);
    // The line given back and the same line counted since go as one.
    expect(written.flat().map((row) => row.admitted)).toEqual([2]);
    book.line('app', 'api', 'm').units += 7;
    await flush.close();
    expect(written.at(-1)!.map((row) => row.units)).toEqual([7]);
    expect(clock.pending).toBe(0);
  });

  it('holds one line per day, application, API and method while the store is down, however long', async () => {
    const clock = new FakeClock(at('2026-11-30T10:00:00Z'));
    const book = new UsageBook(new UsageCalendar('UTC'), clock.now);
    let failing = true;
    const tried: number[] = [];
    const written: UsageRow[][] = [];
    const flush = new UsageHistoryFlush({
      book,
      timers: clock,
      write: async (rows) => {
        tried.push(rows.length);
        if (failing) throw new Error('store down');
        written.push([...rows]);
      },
      onError: () => undefined,
    });
    for (let second = 0; second < 600; second += 1) {
      book.line('app', 'api', 'm').admitted += 1;
      book.line('app', 'api', 'n').refused += 1;
      await clock.advance(1_000);
    }
    // Ten minutes down: each write carried the same two lines, not one more per second.
    expect(new Set(tried)).toEqual(new Set([2]));
    failing = false;
    await clock.advance(1_000);
    expect(written).toEqual([
      [
        expect.objectContaining({ method: 'm', admitted: 600, refused: 0 }),
        expect.objectContaining({ method: 'n', admitted: 0, refused: 600 }),
      ],
    ]);
    await flush.close();
  });
});
