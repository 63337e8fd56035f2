import type { CalendarPeriod, CalendarSpec } from '../kit/calendar-window.js';

/**
 * The words a quota is made of: the well-known ids, the types, the periods and verbs, the windows. The
 * quota schema describes quotas with them, and the rest of the gateway reads them from here or from the
 * model, which gives them again beside the types the schema derives.
 */
/** The well-known quotas (the same ids as the portal the seed describes). Both always exist. */
export const systemQuotaId = '00000000-0000-0000-0000-000000000000';
export const applicationDefaultQuotaId = '00000000-0000-0000-0000-000000000001';
export const wellKnownQuotaIds: ReadonlySet<string> = new Set([systemQuotaId, applicationDefaultQuotaId]);

/** The longest application id a quota can belong to: an LDAP entry's DN, or a plugin's caller name. */
export const longestApplicationId = 1024;

export const quotaTypes = ['APPLICATION', 'API'] as const;
/**
 * `throttle`, `throttlemb` (Axway's) and the extensions: `throttleunits` (what the upstream says an
 * exchange cost) and `concurrency` (requests in flight at once, no window).
 */
export const restrictionTypes = ['throttle', 'throttlemb', 'throttleunits', 'concurrency'] as const;
/**
 * What a restriction does with a request it has no room for: `enforce` refuses it, `shadow` lets it
 * through and reports that it would have refused it. Stored and answered only when `shadow`.
 */
export const restrictionModes = ['enforce', 'shadow'] as const;
/**
 * Accepted on input, singular or plural (the seed shows `seconds`); stored as sent. `month` and `year`
 * are calendar periods only (`window: calendar`): a sliding month has no fixed length.
 */
export const periods = ['second', 'minute', 'hour', 'day', 'week', 'month', 'year'] as const;
export const periodNames = [
  'second',
  'seconds',
  'minute',
  'minutes',
  'hour',
  'hours',
  'day',
  'days',
  'week',
  'weeks',
  'month',
  'months',
  'year',
  'years',
] as const;
/** Periods a calendar window may have (`CalendarPeriod`). */
export const calendarOnlyPeriods: ReadonlySet<string> = new Set(['month', 'year']);
/**
 * How a restriction's window counts: `sliding` (the default, answered absent: any interval of the
 * window's length) or `calendar` (from the start of the day, ISO week, month or year that holds now, in
 * `timeZone`, to its end: see kit/calendar-window.ts).
 */
export const restrictionWindows = ['sliding', 'calendar'] as const;
export const restrictionVerbs = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export type QuotaType = (typeof quotaTypes)[number];
export type RestrictionType = (typeof restrictionTypes)[number];

/**
 * What a restriction counts: messages (`throttle`), body bytes (`throttlemb`), units the upstream says
 * (`throttleunits`), requests in flight (`concurrency`, the draft RateLimit fields' quota unit).
 */
export const restrictionUnits = ['messages', 'bytes', 'units', 'concurrent-requests'] as const;
export type RestrictionUnit = (typeof restrictionUnits)[number];
const unitsByType: Record<RestrictionType, RestrictionUnit> = {
  throttle: 'messages',
  throttlemb: 'bytes',
  throttleunits: 'units',
  concurrency: 'concurrent-requests',
};
export const unitOf = (type: RestrictionType): RestrictionUnit => unitsByType[type];
/** The largest amount of units (or bytes) a restriction counts: RFC 8941 §3.3.1, an Integer has at most 15 digits. */
export const largestUnits = 999_999_999_999_999;
export type Period = (typeof periods)[number];

/** A calendar month or year counts as its longest where one length is needed (the console's, usage's). */
const secondsPer: Record<Period, number> = {
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86_400,
  week: 604_800,
  month: 31 * 86_400,
  year: 366 * 86_400,
};

/** The period named by `name` (`second` or `seconds`, …). */
export function periodOf(name: string): Period {
  return name.replace(/s$/, '') as Period;
}

/**
 * Length of the window of `per` × `period`, in milliseconds; 0 for a `concurrency` restriction, which
 * has none (its counter holds the requests in flight: see `CounterSpec`).
 */
export function windowMs(config: { per?: string | undefined; period?: string | undefined }): number {
  // A calendar window's length changes from one to the next: this is its longest (`calendarOf` gives the rest).
  if (config.per === undefined || config.period === undefined) return 0;
  return Number(config.per) * secondsPer[periodOf(config.period)] * 1000;
}

export const longestWindowMs = 366 * 86_400 * 1000;

/** What a restriction's config says of a calendar window (absent for a sliding one). */
export interface CalendarFields {
  period?: string | undefined;
  window?: string | undefined;
  timeZone?: string | undefined;
  startDay?: number | undefined;
}

/**
 * The calendar window of a restriction, or undefined for a sliding one: its time zone `UTC` and a month's
 * billing day the 1st unless it says others. Made once per restriction: stores know its windows by it.
 */
export function calendarOf(config: CalendarFields): CalendarSpec | undefined {
  if (config.window !== 'calendar' || config.period === undefined) return undefined;
  const period = periodOf(config.period) as CalendarPeriod;
  return {
    period,
    timeZone: config.timeZone ?? 'UTC',
    startDay: period === 'month' ? (config.startDay ?? 1) : 1,
  };
}
