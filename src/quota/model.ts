import { createHash } from 'node:crypto';

/** The well-known quotas (the same ids as the portal the seed describes). Both always exist. */
export const systemQuotaId = '00000000-0000-0000-0000-000000000000';
export const applicationDefaultQuotaId = '00000000-0000-0000-0000-000000000001';
export const wellKnownQuotaIds: ReadonlySet<string> = new Set([systemQuotaId, applicationDefaultQuotaId]);

export const quotaTypes = ['APPLICATION', 'API'] as const;
export const restrictionTypes = ['throttle', 'throttlemb'] as const;
/** Accepted on input, singular or plural (the seed shows `seconds`); stored as sent. */
export const periods = ['second', 'minute', 'hour', 'day', 'week'] as const;
export const periodNames = periods.flatMap((period) => [period, `${period}s`]);
export const restrictionVerbs = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export type QuotaType = (typeof quotaTypes)[number];
export type RestrictionType = (typeof restrictionTypes)[number];
export type Period = (typeof periods)[number];

/** Restriction config, numbers carried as strings as in the seed. */
export type RestrictionConfig =
  | { messages: string; per: string; period: string }
  | { mb: string; per: string; period: string };

export interface Restriction {
  /** Catalog API id, or `*` for every API. */
  api: string;
  /** Catalog method id, or `*` for every method of the API. */
  method: string;
  /** HTTP verb the restriction is limited to; absent for every verb. */
  verb?: string;
  type: RestrictionType;
  config: RestrictionConfig;
}

export interface Quota {
  id: string;
  type: QuotaType;
  name: string;
  description: string;
  restrictions: Restriction[];
  system: boolean;
}

/** A quota as stored: with the application it belongs to, when it is an application's own quota. */
export interface QuotaRecord {
  quota: Quota;
  application?: string;
}

/** A stored quota and its entity tag (`ETag`), the SHA-1 of its stored JSON. */
export interface StoredQuota extends QuotaRecord {
  etag: string;
}

const secondsPer: Record<Period, number> = { second: 1, minute: 60, hour: 3600, day: 86_400, week: 604_800 };

/** The period named by `name` (`second` or `seconds`, …). */
export function periodOf(name: string): Period {
  return name.replace(/s$/, '') as Period;
}

/** Length of the window of `per` × `period`, in milliseconds. */
export function windowMs(config: RestrictionConfig): number {
  return Number(config.per) * secondsPer[periodOf(config.period)] * 1000;
}

export const longestWindowMs = 366 * 86_400 * 1000;

/** The stored form of a record: JSON with a fixed key order, so equal records have equal ETags. */
export function serializeRecord(record: QuotaRecord): string {
  const { quota } = record;
  return JSON.stringify({
    id: quota.id,
    type: quota.type,
    name: quota.name,
    description: quota.description,
    restrictions: quota.restrictions.map((restriction) => ({
      api: restriction.api,
      method: restriction.method,
      ...(restriction.verb ? { verb: restriction.verb } : {}),
      type: restriction.type,
      config:
        'messages' in restriction.config
          ? {
              messages: restriction.config.messages,
              per: restriction.config.per,
              period: restriction.config.period,
            }
          : { mb: restriction.config.mb, per: restriction.config.per, period: restriction.config.period },
    })),
    system: quota.system,
    ...(record.application ? { application: record.application } : {}),
  });
}

/** The ETag of a stored JSON text: SHA-1 hex, which Redis Lua (`redis.sha1hex`) computes the same way. */
export function etagOf(json: string): string {
  return createHash('sha1').update(json, 'utf8').digest('hex');
}

/** The well-known quotas as they are before anyone changes them: no restrictions. */
export function wellKnownQuotas(): QuotaRecord[] {
  return [
    {
      quota: {
        id: systemQuotaId,
        type: 'API',
        name: 'System',
        description: 'Limits on all traffic, across every application',
        restrictions: [],
        system: true,
      },
    },
    {
      quota: {
        id: applicationDefaultQuotaId,
        type: 'APPLICATION',
        name: 'Application Default',
        description: 'Limits per application, for every application without a quota of its own',
        restrictions: [],
        system: true,
      },
    },
  ];
}
