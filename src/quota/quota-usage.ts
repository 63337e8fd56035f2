import type { Limiter } from '../limiter/limiter.js';
import type { QuotaIndex } from './quota-index.js';
import { applicationOfCounter } from './restriction-counters.js';
import type { QuotaRepository } from './quota-repository.js';
import { unitOf, type RestrictionType, type RestrictionUnit } from './quota-terms.js';

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

/** What each restriction of a quota has counted in its current window, or null for an unknown quota. */
export async function quotaUsage(
  index: QuotaIndex,
  limiter: Pick<Limiter, 'usage'>,
  repository: QuotaRepository,
  quotaId: string,
): Promise<QuotaUsage | null> {
  const record = repository.get(quotaId);
  if (!record) return null;
  const perApplication = record.quota.type === 'APPLICATION';
  const counters = index.countersOf(quotaId);
  const restrictions = await Promise.all(
    record.quota.restrictions.map(async (restriction, i): Promise<RestrictionUsage> => {
      const counter = counters.find((candidate) => candidate.index === i);
      const base: RestrictionUsage = {
        index: i,
        type: restriction.type,
        unit: unitOf(restriction.type),
        ...(restriction.mode ? { mode: restriction.mode } : {}),
        limit: counter?.limit ?? 0,
        windowSeconds: (counter?.windowMs ?? 0) / 1000,
      };
      if (!counter)
        return perApplication ? { ...base, applications: [] } : { ...base, used: 0, resetSeconds: 0 };
      const found = await limiter.usage(counter.keyBase, counter.windowMs);
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
          .map((entry) => ({
            application: applicationOfCounter(entry.key.slice(counter.keyBase.length)),
            used: entry.used,
            resetSeconds: secondsOf(entry.resetMs),
          }))
          .sort((a, b) => a.application.localeCompare(b.application)),
      };
    }),
  );
  return { quota: quotaId, restrictions };
}
