import { describe, expect, it } from 'vitest';
import {
  CalendarWindows,
  calendarWindowAt,
  isTimeZone,
  type CalendarPeriod,
  type CalendarSpec,
} from '../../src/kit/calendar-window.js';

const at = (iso: string): number => Date.parse(iso);
const hours = (ms: number): number => ms / 3_600_000;

function windowOf(period: CalendarPeriod, timeZone: string, instant: string, startDay = 1) {
  const { start, end } = calendarWindowAt({ period, timeZone, startDay }, at(instant));
  return {
    start: new Date(start).toISOString(),
    end: new Date(end).toISOString(),
    hours: hours(end - start),
  };
}

describe('calendarWindowAt: days', () => {
  it('is the UTC day in UTC', () => {
    expect(windowOf('day', 'UTC', '2026-03-08T23:59:59.999Z')).toEqual({
      start: '2026-03-08T00:00:00.000Z',
      end: '2026-03-09T00:00:00.000Z',
      hours: 24,
    });
  });

  it('is 23 hours on the day New York springs forward and 25 on the day it falls back', () => {
    expect(windowOf('day', 'America/New_York', '2026-03-08T12:00:00Z')).toEqual({
      start: '2026-03-08T05:00:00.000Z',
      end: '2026-03-09T04:00:00.000Z',
      hours: 23,
    });
    expect(windowOf('day', 'America/New_York', '2026-11-01T12:00:00Z')).toEqual({
      start: '2026-11-01T04:00:00.000Z',
      end: '2026-11-02T05:00:00.000Z',
      hours: 25,
    });
  });

  it('is 23 and 25 hours on Berlin’s change days, which fall on other dates than New York’s', () => {
    expect(windowOf('day', 'Europe/Berlin', '2026-03-29T10:00:00Z').hours).toBe(23);
    expect(windowOf('day', 'Europe/Berlin', '2026-10-25T10:00:00Z').hours).toBe(25);
    expect(windowOf('day', 'Europe/Berlin', '2026-03-08T10:00:00Z').hours).toBe(24);
  });

  it('starts at Kolkata’s midnight, 5:30 before UTC’s', () => {
    expect(windowOf('day', 'Asia/Kolkata', '2026-06-15T18:29:59Z')).toEqual({
      start: '2026-06-14T18:30:00.000Z',
      end: '2026-06-15T18:30:00.000Z',
      hours: 24,
    });
    expect(windowOf('day', 'Asia/Kolkata', '2026-06-15T18:30:00Z').start).toBe('2026-06-15T18:30:00.000Z');
  });

  it('is 23.5 and 24.5 hours on Lord Howe’s half-hour daylight-saving changes', () => {
    // Lord Howe moves from +11 to +10:30 on the first Sunday of April, and back on the first of October.
    expect(windowOf('day', 'Australia/Lord_Howe', '2026-04-05T06:00:00Z').hours).toBe(24.5);
    expect(windowOf('day', 'Australia/Lord_Howe', '2026-10-04T06:00:00Z').hours).toBe(23.5);
  });

  it('follows Chatham’s +12:45 and +13:45', () => {
    expect(windowOf('day', 'Pacific/Chatham', '2026-01-10T00:00:00Z')).toEqual({
      start: '2026-01-09T10:15:00.000Z',
      end: '2026-01-10T10:15:00.000Z',
      hours: 24,
    });
    expect(windowOf('day', 'Pacific/Chatham', '2026-07-10T00:00:00Z').start).toBe('2026-07-09T11:15:00.000Z');
    expect(windowOf('day', 'Pacific/Chatham', '2026-04-05T00:00:00Z').hours).toBe(25);
  });

  it('begins at the change on a day whose midnight is skipped (Santiago springs forward at midnight)', () => {
    // 2026-09-06 00:00 does not exist in America/Santiago: the clock jumps from 23:59:59 to 01:00.
    const day = windowOf('day', 'America/Santiago', '2026-09-06T12:00:00Z');
    expect(day).toEqual({ start: '2026-09-06T04:00:00.000Z', end: '2026-09-07T03:00:00.000Z', hours: 23 });
  });
});

describe('calendarWindowAt: weeks', () => {
  it('starts on Monday (ISO), in the zone’s calendar', () => {
    // 2026-11-29 is a Sunday; 2026-11-30 a Monday.
    expect(windowOf('week', 'UTC', '2026-11-29T23:00:00Z')).toEqual({
      start: '2026-11-23T00:00:00.000Z',
      end: '2026-11-30T00:00:00.000Z',
      hours: 168,
    });
    // 23:00 UTC on Sunday is already Monday in Berlin.
    expect(windowOf('week', 'Europe/Berlin', '2026-11-29T23:00:00Z').start).toBe('2026-11-29T23:00:00.000Z');
  });

  it('holds a daylight-saving change: 167 or 169 hours', () => {
    expect(windowOf('week', 'America/New_York', '2026-03-08T12:00:00Z').hours).toBe(167);
    expect(windowOf('week', 'America/New_York', '2026-11-01T12:00:00Z').hours).toBe(169);
  });

  it('crosses a year boundary', () => {
    expect(windowOf('week', 'UTC', '2027-01-01T00:00:00Z')).toEqual({
      start: '2026-12-28T00:00:00.000Z',
      end: '2027-01-04T00:00:00.000Z',
      hours: 168,
    });
  });
});

describe('calendarWindowAt: months', () => {
  it('is the calendar month from its first day by default, whatever its length', () => {
    expect(windowOf('month', 'UTC', '2026-11-30T23:59:59.999Z')).toEqual({
      start: '2026-11-01T00:00:00.000Z',
      end: '2026-12-01T00:00:00.000Z',
      hours: 30 * 24,
    });
    expect(windowOf('month', 'UTC', '2026-12-31T12:00:00Z').hours).toBe(31 * 24);
    expect(windowOf('month', 'UTC', '2026-02-14T12:00:00Z').hours).toBe(28 * 24);
  });

  it('holds February 29 of a leap year', () => {
    expect(windowOf('month', 'UTC', '2028-02-29T23:59:59Z')).toEqual({
      start: '2028-02-01T00:00:00.000Z',
      end: '2028-03-01T00:00:00.000Z',
      hours: 29 * 24,
    });
  });

  it('runs from the billing day to the next one', () => {
    expect(windowOf('month', 'UTC', '2026-11-14T23:59:59Z', 15)).toEqual({
      start: '2026-10-15T00:00:00.000Z',
      end: '2026-11-15T00:00:00.000Z',
      hours: 31 * 24,
    });
    expect(windowOf('month', 'UTC', '2026-11-15T00:00:00Z', 15).start).toBe('2026-11-15T00:00:00.000Z');
  });

  it('on the 28th runs through February 28, and a leap year’s 29th', () => {
    expect(windowOf('month', 'UTC', '2027-03-01T00:00:00Z', 28)).toEqual({
      start: '2027-02-28T00:00:00.000Z',
      end: '2027-03-28T00:00:00.000Z',
      hours: 28 * 24,
    });
    expect(windowOf('month', 'UTC', '2028-02-29T12:00:00Z', 28)).toEqual({
      start: '2028-02-28T00:00:00.000Z',
      end: '2028-03-28T00:00:00.000Z',
      hours: 29 * 24,
    });
  });

  it('crosses the year from a December billing day', () => {
    expect(windowOf('month', 'UTC', '2027-01-05T00:00:00Z', 20)).toEqual({
      start: '2026-12-20T00:00:00.000Z',
      end: '2027-01-20T00:00:00.000Z',
      hours: 31 * 24,
    });
  });

  it('is a month of the zone’s wall clock: one hour short in New York’s March', () => {
    expect(windowOf('month', 'America/New_York', '2026-03-31T12:00:00Z')).toEqual({
      start: '2026-03-01T05:00:00.000Z',
      end: '2026-04-01T04:00:00.000Z',
      hours: 31 * 24 - 1,
    });
    // 2026-12-01T02:00Z is still November 30 in New York.
    expect(windowOf('month', 'America/New_York', '2026-12-01T02:00:00Z').start).toBe(
      '2026-11-01T04:00:00.000Z',
    );
  });
});

describe('calendarWindowAt: years', () => {
  it('runs from January 1 to January 1, 366 days in a leap year', () => {
    expect(windowOf('year', 'UTC', '2028-12-31T23:59:59.999Z')).toEqual({
      start: '2028-01-01T00:00:00.000Z',
      end: '2029-01-01T00:00:00.000Z',
      hours: 366 * 24,
    });
    expect(windowOf('year', 'UTC', '2029-01-01T00:00:00Z').hours).toBe(365 * 24);
  });

  it('starts at the zone’s new year: Kolkata’s is 5:30 before UTC’s', () => {
    expect(windowOf('year', 'Asia/Kolkata', '2026-12-31T19:00:00Z')).toEqual({
      start: '2026-12-31T18:30:00.000Z',
      end: '2027-12-31T18:30:00.000Z',
      hours: 365 * 24,
    });
  });
});

describe('every window', () => {
  const zones = [
    'UTC',
    'America/New_York',
    'Europe/Berlin',
    'Asia/Kolkata',
    'Australia/Lord_Howe',
    'Pacific/Chatham',
  ];
  const periods: CalendarPeriod[] = ['day', 'week', 'month', 'year'];

  it('holds its instant, and the next one starts exactly at its end, every 31 hours over 2026 and 2028', () => {
    let checked = 0;
    for (const timeZone of zones) {
      for (const period of periods) {
        const spec: CalendarSpec = { period, timeZone, startDay: period === 'month' ? 28 : 1 };
        for (const year of [2026, 2028]) {
          for (
            let instant = Date.UTC(year, 0, 1);
            instant < Date.UTC(year + 1, 0, 1);
            instant += 31 * 3_600_000
          ) {
            const window = calendarWindowAt(spec, instant);
            expect(window.start <= instant && instant < window.end).toBe(true);
            expect(calendarWindowAt(spec, window.end).start).toBe(window.end);
            expect(calendarWindowAt(spec, window.end - 1).end).toBe(window.end);
            checked += 1;
          }
        }
      }
    }
    // ⌈8760 / 31⌉ instants in 2026, ⌈8784 / 31⌉ in 2028.
    expect(checked).toBe(6 * 4 * (283 + 284));
  });
});

describe('CalendarWindows', () => {
  it('keeps a window until its end, then reads the next one', () => {
    const windows = new CalendarWindows();
    const spec: CalendarSpec = { period: 'day', timeZone: 'UTC', startDay: 1 };
    const first = windows.at(spec, at('2026-11-29T10:00:00Z'));
    expect(windows.at(spec, at('2026-11-29T23:59:59.999Z'))).toBe(first);
    expect(windows.at(spec, at('2026-11-30T00:00:00Z')).start).toBe(at('2026-11-30T00:00:00Z'));
  });
});

describe('isTimeZone', () => {
  it('knows IANA names and UTC, and nothing else', () => {
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Mars/Olympus_Mons')).toBe(false);
    expect(isTimeZone('')).toBe(false);
  });
});
