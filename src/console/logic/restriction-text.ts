import { apiName, methodName, type Catalog } from './catalog.js';
import type { QuotaAnswer } from './quota-form.js';

type Restriction = QuotaAnswer['restrictions'][number];

/**
 * "100 messages per 1 minute", "2.5 MB per 1 day", "1,000 messages per calendar month from the 15th (UTC)", "10,000 units (x-tokens) per 1 day", "5 requests in
 * flight at once": the limit of a restriction in words. Units name where they are read: the header,
 * else the body paths, added.
 */
export function limitText(restriction: Restriction): string {
  const { config } = restriction;
  if (restriction.type === 'concurrency') {
    const connections = Number(config.connections);
    return `${connections.toLocaleString('en-US')} request${connections === 1 ? '' : 's'} in flight at once`;
  }
  const per = Number(config.per);
  const period = (config.period ?? '').replace(/s$/, '');
  const window =
    config.window === 'calendar'
      ? calendarText(period, config)
      : per === 1
        ? `1 ${period}`
        : `${per.toLocaleString('en-US')} ${period}s`;
  const amount =
    restriction.type === 'throttle'
      ? `${Number(config.messages).toLocaleString('en-US')} message${config.messages === '1' ? '' : 's'}`
      : restriction.type === 'throttleunits'
        ? `${Number(config.units).toLocaleString('en-US')} unit${config.units === '1' ? '' : 's'} (${unitSources(config)})`
        : `${config.mb} MB`;
  return `${amount} per ${window}`;
}

/** "calendar month from the 15th (America/New_York)", "calendar day (UTC)": a calendar window in words. */
function calendarText(period: string, { timeZone, startDay }: Restriction['config']): string {
  const from =
    period === 'month' && startDay !== undefined && startDay !== 1 ? ` from the ${ordinal(startDay)}` : '';
  return `calendar ${period}${from} (${timeZone ?? 'UTC'})`;
}

const ordinal = (day: number): string =>
  `${day}${day % 10 === 1 && day !== 11 ? 'st' : day % 10 === 2 && day !== 12 ? 'nd' : day % 10 === 3 && day !== 13 ? 'rd' : 'th'}`;

/** "x-tokens", "usage.total_tokens", "x-tokens, else a.b + c.d": where a throttleunits reads its units. */
const unitSources = ({ header, body }: Restriction['config']): string =>
  [header, body === undefined ? undefined : [body].flat().join(' + ')]
    .filter((source) => source !== undefined)
    .join(', else ');

/** The badge of a shadow restriction and what it means, or null for an enforced one. */
export function modeBadge(restriction: Restriction): { text: string; title: string } | null {
  return restriction.mode === 'shadow'
    ? {
        text: 'shadow',
        title: 'Counted exactly as if enforced; never refuses, reports what it would have refused',
      }
    : null;
}

/** "every API", "Pet Store › getPet", with " · GET" when the restriction counts one verb only. */
export function scopeText(restriction: Restriction, catalog: Catalog): string {
  const api = apiName(catalog, restriction.api);
  const scope =
    restriction.api === '*' ? api : `${api} › ${methodName(catalog, restriction.api, restriction.method)}`;
  return restriction.verb ? `${scope} · ${restriction.verb} only` : scope;
}

/**
 * "per client address", "per value of x-tenant": whose count each count of a restriction counted `by`
 * caller is, or null for one count (all traffic, or each application).
 */
export function byText(restriction: Pick<Restriction, 'by'>): string | null {
  const { by } = restriction;
  if (by === undefined) return null;
  return by === 'client' ? 'per client address' : `per value of ${by.slice('header:'.length)}`;
}

/** The scope of a restriction and, when it counts by caller, whose count each count is. */
export function countedText(restriction: Restriction, catalog: Catalog): string {
  const by = byText(restriction);
  return by === null ? scopeText(restriction, catalog) : `${scopeText(restriction, catalog)}, ${by}`;
}

/** Says whose count the bar of a restriction counted by caller shows: the busiest of `callers`. */
export function callersText(callers: number): string {
  if (callers === 0) return 'no caller counted yet';
  if (callers === 1) return 'the only caller counted';
  return `the busiest of ${callers.toLocaleString('en-US')} callers counted`;
}
