/**
 * Calendar windows: the day, ISO week, month (from a billing day) or year that holds an instant, in an
 * IANA time zone, as instants in milliseconds. Read through `Intl.DateTimeFormat`, whose zone data is
 * Node's own (ICU): no package to keep up to date beside it. A day is midnight to midnight of the zone's
 * wall clock, so a daylight-saving day is 23 or 25 hours long (23.5 or 24.5 on Lord Howe).
 */
export const calendarPeriods = ['day', 'week', 'month', 'year'] as const;
export type CalendarPeriod = (typeof calendarPeriods)[number];

export interface CalendarSpec {
  period: CalendarPeriod;
  /** IANA time zone, `UTC` included. */
  timeZone: string;
  /** Months only: the day of the month each window starts on (1–28, so every month has it). */
  startDay: number;
}

/** One window: `[start, end)` in milliseconds. */
export interface CalendarWindow {
  start: number;
  end: number;
}

/** The latest billing day: every month, February included, has it. */
export const latestStartDay = 28;

const dayMs = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/** Whether `timeZone` is a time zone `Intl` knows (an IANA name or `UTC`). */
export function isTimeZone(timeZone: string): boolean {
  try {
    formatterOf(timeZone);
    return true;
  } catch {
    return false;
  }
}

/** The wall clock of `timeZone` at `instant`, as if it were UTC: milliseconds of whole seconds. */
function wallClock(instant: number, timeZone: string): number {
  const fields: Record<string, number> = {};
  for (const part of formatterOf(timeZone).formatToParts(instant)) {
    if (part.type !== 'literal') fields[part.type] = Number(part.value);
  }
  return Date.UTC(fields.year!, fields.month! - 1, fields.day!, fields.hour!, fields.minute!, fields.second!);
}

/** Whole days since 1970-01-01 of a wall-clock time read as UTC. */
const dayNumber = (wall: number): number => Math.floor(wall / dayMs);

/**
 * The first instant of the day `day` (days since 1970-01-01) of the zone's calendar: its midnight, or
 * when a clock change skips midnight, the instant the day begins at. Offsets are read a day and a half
 * on either side, which holds any one change (zones move at most once in a few days).
 */
function startOfDay(day: number, timeZone: string): number {
  const midnight = day * dayMs;
  const candidates: number[] = [];
  for (const probe of [midnight - 1.5 * dayMs, midnight + 1.5 * dayMs]) {
    const offset = wallClock(probe, timeZone) - Math.floor(probe / 1000) * 1000;
    const instant = midnight - offset;
    if (wallClock(instant, timeZone) === midnight) candidates.push(instant);
  }
  if (candidates.length > 0) return Math.min(...candidates);
  // Midnight was skipped: the day begins at the change, the first instant whose wall clock is that day.
  let before = midnight - 1.5 * dayMs;
  let after = midnight + 1.5 * dayMs;
  while (after - before > 1000) {
    const middle = Math.floor((before + after) / 2000) * 1000;
    if (dayNumber(wallClock(middle, timeZone)) >= day) after = middle;
    else before = middle;
  }
  return after;
}

/** Days since 1970-01-01 of a date of the proleptic Gregorian calendar (month 1–12, spilling over). */
const dayOf = (year: number, month: number, day: number): number => dayNumber(Date.UTC(year, month - 1, day));

/** The window of `spec` that holds `instant`. */
export function calendarWindowAt(spec: CalendarSpec, instant: number): CalendarWindow {
  const wall = wallClock(instant, spec.timeZone);
  const today = dayNumber(wall);
  let first: number;
  let next: number;
  switch (spec.period) {
    case 'day':
      first = today;
      next = today + 1;
      break;
    case 'week': {
      // 1970-01-01 was a Thursday: the ISO weekday (Monday 0) of a day number is (n + 3) mod 7.
      first = today - ((((today + 3) % 7) + 7) % 7);
      next = first + 7;
      break;
    }
    case 'month': {
      const date = new Date(wall);
      const year = date.getUTCFullYear();
      const month = date.getUTCMonth() + 1 - (date.getUTCDate() < spec.startDay ? 1 : 0);
      first = dayOf(year, month, spec.startDay);
      next = dayOf(year, month + 1, spec.startDay);
      break;
    }
    case 'year': {
      const year = new Date(wall).getUTCFullYear();
      first = dayOf(year, 1, 1);
      next = dayOf(year + 1, 1, 1);
      break;
    }
  }
  return { start: startOfDay(first, spec.timeZone), end: startOfDay(next, spec.timeZone) };
}

/**
 * The window of one calendar spec that holds `now`, read again only once `now` leaves the last one: a
 * boundary is known in advance, so a request inside the window costs two comparisons.
 */
export class CalendarWindows {
  /** By spec object: each restriction's is made once, so the lookup allocates nothing. */
  private readonly known = new WeakMap<CalendarSpec, CalendarWindow>();

  at(spec: CalendarSpec, now: number): CalendarWindow {
    const window = this.known.get(spec);
    if (window !== undefined && now >= window.start && now < window.end) return window;
    const current = calendarWindowAt(spec, now);
    this.known.set(spec, current);
    return current;
  }
}
