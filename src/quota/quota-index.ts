import { createHash } from 'node:crypto';
import { applicationDefaultQuotaId, windowMs, type Restriction, type StoredQuota } from './model.js';
import { unitsOf } from './quota-schema.js';

/** A restriction ready to be checked: its counter, its limit in units, its window. */
export interface ApplicableRestriction {
  /** Counter key: per restriction, and per application for application quotas. */
  counterKey: string;
  quotaId: string;
  /** Position of the restriction in its quota. */
  index: number;
  type: Restriction['type'];
  /** Messages for throttle, bytes for throttlemb. */
  limit: number;
  windowMs: number;
}

interface CompiledRestriction extends Omit<ApplicableRestriction, 'counterKey'> {
  /** Counter key of the restriction; application quotas append the application. */
  keyBase: string;
  api: string;
  method: string;
  verb: string | undefined;
}

function compile(record: StoredQuota): CompiledRestriction[] {
  return record.quota.restrictions.map((restriction, index) => {
    const window = windowMs(restriction.config);
    // The counter survives a change of limit, but not a change of what it counts or of its window.
    const identity = [
      restriction.api,
      restriction.method,
      restriction.verb ?? '',
      restriction.type,
      window,
    ].join('|');
    const fingerprint = createHash('sha1').update(identity).digest('hex').slice(0, 12);
    const limit = unitsOf(restriction.config);
    return {
      keyBase: `${record.quota.id}:${index}:${fingerprint}`,
      quotaId: record.quota.id,
      index,
      type: restriction.type,
      limit,
      windowMs: window,
      api: restriction.api,
      method: restriction.method,
      verb: restriction.verb,
    };
  });
}

const matches = (restriction: CompiledRestriction, api: string, method: string | null, verb: string) =>
  (restriction.api === '*' || restriction.api === api) &&
  (restriction.method === '*' || restriction.method === method) &&
  (restriction.verb === undefined || restriction.verb === verb);

const applicable = (restriction: CompiledRestriction, application?: string): ApplicableRestriction => {
  const { keyBase, api: _api, method: _method, verb: _verb, ...rest } = restriction;
  return { ...rest, counterKey: application === undefined ? keyBase : `${keyBase}:app:${application}` };
};

/**
 * The quota definitions compiled for the request path: which restrictions apply to a request. Built
 * once per change of the definitions, never read from the store per request.
 */
export class QuotaIndex {
  private readonly apiWide: CompiledRestriction[];
  private readonly byApplication: Map<string, CompiledRestriction[]>;
  private readonly applicationDefault: CompiledRestriction[];
  private readonly apiWideCache = new Map<string, ApplicableRestriction[]>();

  constructor(records: readonly StoredQuota[]) {
    this.apiWide = records.filter((record) => record.quota.type === 'API').flatMap(compile);
    this.byApplication = new Map(
      records.filter((record) => record.application).map((record) => [record.application!, compile(record)]),
    );
    const fallback = records.find((record) => record.quota.id === applicationDefaultQuotaId);
    this.applicationDefault = fallback ? compile(fallback) : [];
  }

  /**
   * Restrictions that apply to a request: those of every API-type quota that match (all traffic counts
   * together), and those of the application's own quota, or else of the Application Default (counted
   * per application). Without an application, only the API-type ones.
   * @param method the catalog method id, or null for a path no method declares
   * @param verb the verb as routed (HEAD counts as GET)
   */
  applicableTo(
    api: string,
    method: string | null,
    verb: string,
    application: string | undefined,
  ): ApplicableRestriction[] {
    const cacheKey = `${api} ${method ?? ''} ${verb}`;
    let shared = this.apiWideCache.get(cacheKey);
    if (!shared) {
      shared = this.apiWide
        .filter((restriction) => matches(restriction, api, method, verb))
        .map((r) => applicable(r));
      this.apiWideCache.set(cacheKey, shared);
    }
    if (application === undefined) return shared;
    const own = this.byApplication.get(application) ?? this.applicationDefault;
    const perApplication = own
      .filter((restriction) => matches(restriction, api, method, verb))
      .map((restriction) => applicable(restriction, application));
    return perApplication.length === 0 ? shared : [...shared, ...perApplication];
  }

  /** Counter key (or key prefix, for application quotas) and window of every restriction of a quota. */
  countersOf(quotaId: string): Array<{ index: number; keyBase: string; windowMs: number; limit: number }> {
    const all = [...this.apiWide, ...this.applicationDefault, ...[...this.byApplication.values()].flat()];
    return all
      .filter((restriction) => restriction.quotaId === quotaId)
      .map(({ index, keyBase, windowMs: window, limit }) => ({ index, keyBase, windowMs: window, limit }));
  }
}
