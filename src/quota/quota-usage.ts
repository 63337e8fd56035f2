import { CalendarCounters } from '../limiter/calendar-counters.js';
import type { CounterUsage } from '../limiter/counter-store.js';
import type { Limiter } from '../limiter/limiter.js';
import type { QuotaIndex } from './quota-index.js';
import { applicationOfCounter, generationOfCounter } from './restriction-counters.js';
import type { QuotaRepository } from './quota-repository.js';
import { unitOf, type RestrictionType, type RestrictionUnit } from './quota-terms.js';
import type { CalendarSpec } from '../kit/calendar-window.js';

export interface RestrictionUsage {
  index: number;
  type: RestrictionType;
  /** messages for throttle, bytes for throttlemb, units for throttleunits. */
  unit: RestrictionUnit;
  /** Only for a shadow restriction: its rejections are the requests it would have refused. */
  mode?: 'shadow';
  limit: number;
  windowSeconds: number;
  /** API quotas: units counted for all traffic. */
  used?: number;
  /** API quotas: seconds until the oldest counted units leave the window (0 when none are counted). */
  resetSeconds?: number;
  /** Counted by caller (`by`): whose count each count is. */
  by?: string;
  /** Counted by caller: how many callers (and overflow counts) have units counted in this gateway's view. */
  callers?: number;
  /** Application quotas: units counted per application (those with any). */
  applications?: Array<{ application: string; used: number; resetSeconds: number }>;
}

export interface QuotaUsage {
  quota: string;
  restrictions: RestrictionUsage[];
}

/** Milliseconds as whole seconds, rounded up: "in 0 s" would be wrong while units remain. */
const secondsOf = (ms: number) => Math.ceil(ms / 1000);

/** The windows of calendar restrictions, as the stores key them. */
const calendars = new CalendarCounters();

/**
 * The counters under `keyBase` in the current window: of a calendar restriction, those of the window
 * that holds `now` (each window is a counter of its own, keyed by its start: `CalendarCounters`), their
 * keys as the window's start were not part of them, reset at the window's end.
 */
async function countersNow(
  limiter: Pick<Limiter, 'usage'>,
  counter: { keyBase: string; windowMs: number; calendar: CalendarSpec | undefined },
  now: number,
): Promise<CounterUsage[]> {
  const { keyBase, windowMs, calendar } = counter;
  if (calendar === undefined) return limiter.usage(keyBase, windowMs);
  const [inWindow] = calendars.inWindow([{ key: keyBase, windowMs, calendar }], now);
  const suffix = inWindow!.key.slice(keyBase.length);
  const found = await limiter.usage(keyBase, inWindow!.windowMs);
  return found
    .filter((entry) => entry.key.endsWith(suffix))
    .map((entry) => ({
      ...entry,
      key: entry.key.slice(0, -suffix.length),
      resetMs: inWindow!.windowEnd! - now,
    }));
}

/** The length of a restriction's current window: a calendar one's changes from one to the next. */
function windowMsNow(
  counter: { windowMs: number; calendar: CalendarSpec | undefined } | undefined,
  now: number,
): number {
  if (counter?.calendar === undefined) return counter?.windowMs ?? 0;
  const { start, end } = calendars.windowAt(counter.calendar, now);
  return end - start;
}

/**
 * What each restriction of a quota has counted in its current window, or null for an unknown quota.
 * `now` is the counters' clock, which says a calendar restriction's current window.
 */
export async function quotaUsage(
  index: QuotaIndex,
  limiter: Pick<Limiter, 'usage'>,
  repository: QuotaRepository,
  quotaId: string,
  now: () => number,
): Promise<QuotaUsage | null> {
  const record = repository.get(quotaId);
  if (!record) return null;
  const perApplication = record.quota.type === 'APPLICATION';
  const counters = index.countersOf(quotaId);
  const at = now();
  const restrictions = await Promise.all(
    record.quota.restrictions.map(async (restriction, i): Promise<RestrictionUsage> => {
      const counter = counters.find((candidate) => candidate.index === i);
      const base: RestrictionUsage = {
        index: i,
        type: restriction.type,
        unit: unitOf(restriction.type),
        ...(restriction.mode ? { mode: restriction.mode } : {}),
        limit: counter?.limit ?? 0,
        windowSeconds: windowMsNow(counter, at) / 1000,
      };
      if (!counter)
        return perApplication ? { ...base, applications: [] } : { ...base, used: 0, resetSeconds: 0 };
      const found = await countersNow(limiter, counter, at);
      // Counted by caller, no count is the quota's: the busiest caller's, and how many there are.
      if (restriction.by !== undefined) {
        const busiest = found.reduce<(typeof found)[number] | undefined>(
          (most, entry) => (most === undefined || entry.used > most.used ? entry : most),
          undefined,
        );
        return {
          ...base,
          by: restriction.by,
          callers: found.length,
          used: busiest?.used ?? 0,
          resetSeconds: secondsOf(busiest?.resetMs ?? 0),
        };
      }
      if (!perApplication) {
        const own = found.find((entry) => entry.key === counter.keyBase);
        return { ...base, used: own?.used ?? 0, resetSeconds: secondsOf(own?.resetMs ?? 0) };
      }
      return {
        ...base,
        applications: found
          .map((entry) => {
            const afterBase = entry.key.slice(counter.keyBase.length);
            return { afterBase, application: applicationOfCounter(afterBase), entry };
          })
          // A reset left the counters of older generations to expire: they count nothing any more.
          .filter(
            ({ afterBase, application }) =>
              generationOfCounter(afterBase) === index.generation(application, counter.keyBase),
          )
          .map(({ application, entry }) => ({
            application,
            used: entry.used,
            resetSeconds: secondsOf(entry.resetMs),
          }))
          .sort((a, b) => a.application.localeCompare(b.application)),
      };
    }),
  );
  return { quota: quotaId, restrictions };
}
