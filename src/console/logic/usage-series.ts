import { limitText, scopeText } from './restriction-text.js';
import type { Catalog } from './catalog.js';
import type { QuotaAnswer } from './quota-form.js';

/** One line of the usage history as the admin API answers it (docs/quotas.md, "Usage history"). */
export interface UsageRowAnswer {
  date: string;
  /** Null for the callers of a public API (auth none). */
  application: string | null;
  api: string;
  method: string | null;
  admitted: number;
  refused: number;
  bytesIn: number;
  bytesOut: number;
  units: number;
}

/** One application's calls per day of a range: every day of it, in order, 0 where it made none. */
export interface DailySeries {
  application: string | null;
  days: string[];
  admitted: number[];
  refused: number[];
}

const dayMs = 86_400_000;

const dateOf = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** The `count` days up to the one `now` falls on, in UTC, as the History view opens on them. */
export function lastDays(now: number, count: number): { from: string; to: string } {
  return { from: dateOf(now - (count - 1) * dayMs), to: dateOf(now) };
}

/** Every date from `from` to `to`, both included (YYYY-MM-DD); none when `to` is before `from`. */
export function daysOf(from: string, to: string): string[] {
  const days: string[] = [];
  const last = Date.parse(`${to}T00:00:00Z`);
  for (let day = Date.parse(`${from}T00:00:00Z`); day <= last; day += dayMs) days.push(dateOf(day));
  return days;
}

/**
 * The rows of a range as one series per application (in the order the rows name them first): admitted
 * and refused summed over the methods (and the APIs, unless `api` names one) of each day.
 */
export function dailySeries(
  rows: readonly UsageRowAnswer[],
  range: { from: string; to: string },
  api?: string,
): DailySeries[] {
  const days = daysOf(range.from, range.to);
  const indexOf = new Map(days.map((day, index) => [day, index]));
  const series = new Map<string | null, DailySeries>();
  for (const row of rows) {
    const index = indexOf.get(row.date);
    if (index === undefined || (api !== undefined && row.api.toLowerCase() !== api.toLowerCase())) continue;
    let entry = series.get(row.application);
    if (!entry) {
      entry = { application: row.application, days, admitted: days.map(() => 0), refused: days.map(() => 0) };
      series.set(row.application, entry);
    }
    entry.admitted[index]! += row.admitted;
    entry.refused[index]! += row.refused;
  }
  return [...series.values()];
}

type Restriction = QuotaAnswer['restrictions'][number];

/** The limit a chart draws as a line, and the restrictions it states in words instead, with why. */
export interface DailyLimit {
  drawn: { messages: number; text: string } | null;
  stated: string[];
}

const isOneDay = ({ config }: Restriction): boolean =>
  Number(config.per) === 1 && (config.period === 'day' || config.period === 'days');

/** Whether the restriction counts every call a chart of `api` (every API when undefined) shows. */
const countsAll = (restriction: Restriction, api: string | undefined): boolean =>
  restriction.method === '*' &&
  restriction.verb === undefined &&
  (restriction.api === '*' || restriction.api.toLowerCase() === api?.toLowerCase());

/** Why a throttle restriction is not the chart's line, or null when it is one of the candidates. */
function whyNotDrawn(restriction: Restriction, api: string | undefined): string | null {
  if (restriction.by !== undefined) return 'it counts each caller apart';
  if (!countsAll(restriction, api)) return 'it counts part of the calls shown';
  if (!isOneDay(restriction)) return 'its window is not one day';
  if (restriction.mode === 'shadow') return 'it is in shadow mode: it never refuses';
  return null;
}

/**
 * The line a daily chart of an application's calls may honestly draw: the smallest enforced `throttle`
 * restriction of its quota that counts every call shown (every method of the API shown, or of every API)
 * in a window of one day, calendar or sliding. Every other restriction that counts calls is stated in
 * words with the reason it is not drawn: a month's limit drawn as a daily line would mislead.
 */
export function dailyLimit(quota: QuotaAnswer, catalog: Catalog, api?: string): DailyLimit {
  const candidates: Restriction[] = [];
  const stated: string[] = [];
  for (const restriction of quota.restrictions) {
    if (restriction.type !== 'throttle') continue;
    const why = whyNotDrawn(restriction, api);
    if (why === null) candidates.push(restriction);
    else stated.push(`${limitText(restriction)} on ${scopeText(restriction, catalog)} (not drawn: ${why})`);
  }
  const [first, ...others] = [...candidates].sort(
    (a, b) => Number(a.config.messages) - Number(b.config.messages),
  );
  for (const other of others)
    stated.push(`${limitText(other)} on ${scopeText(other, catalog)} (not drawn: a smaller daily limit is)`);
  return {
    drawn: first ? { messages: Number(first.config.messages), text: limitText(first) } : null,
    stated,
  };
}
