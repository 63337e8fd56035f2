import type { Limiter } from '../limiter/limiter.js';
import { applicationOfCounter, type QuotaIndex } from './quota-index.js';
import type { QuotaRepository } from './quota-repository.js';

export interface RestrictionUsage {
  index: number;
  type: 'throttle' | 'throttlemb';
  /** messages for throttle, bytes for throttlemb. */
  unit: 'messages' | 'bytes';
  limit: number;
  windowSeconds: number;
  /** API quotas: units counted for all traffic. */
  used?: number;
  /** Application quotas: units counted per application (those with any). */
  applications?: Array<{ application: string; used: number }>;
}

export interface QuotaUsage {
  quota: string;
  restrictions: RestrictionUsage[];
}

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
        unit: restriction.type === 'throttle' ? 'messages' : 'bytes',
        limit: counter?.limit ?? 0,
        windowSeconds: (counter?.windowMs ?? 0) / 1000,
      };
      if (!counter) return perApplication ? { ...base, applications: [] } : { ...base, used: 0 };
      if (!perApplication) {
        const found = await limiter.usage(counter.keyBase, counter.windowMs);
        return { ...base, used: found.find((entry) => entry.key === counter.keyBase)?.used ?? 0 };
      }
      const found = await limiter.usage(counter.keyBase, counter.windowMs);
      return {
        ...base,
        applications: found
          .map((entry) => ({
            application: applicationOfCounter(entry.key.slice(counter.keyBase.length)),
            used: entry.used,
          }))
          .sort((a, b) => a.application.localeCompare(b.application)),
      };
    }),
  );
  return { quota: quotaId, restrictions };
}
