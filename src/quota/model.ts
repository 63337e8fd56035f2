import type { Quota, QuotaRecord } from './quota-schema.js';
import { applicationDefaultQuotaId, systemQuotaId } from './quota-terms.js';

export type {
  Quota,
  QuotaDto,
  QuotaRecord,
  Restriction,
  RestrictionConfig,
  StoredQuota,
} from './quota-schema.js';

export * from './quota-terms.js';

/** The well-known quotas as they are before anyone changes them: no restrictions. */
export function wellKnownQuotas(): QuotaRecord[] {
  const system: Quota = {
    id: systemQuotaId,
    type: 'API',
    name: 'System',
    description: 'Limits on all traffic, across every application',
    restrictions: [],
    system: true,
  };
  const applicationDefault: Quota = {
    id: applicationDefaultQuotaId,
    type: 'APPLICATION',
    name: 'Application Default',
    description: 'Limits per application, for every application without a quota of its own',
    restrictions: [],
    system: true,
  };
  return [{ quota: system }, { quota: applicationDefault }];
}
