import type { Attributes, Span } from '@opentelemetry/api';
import type { LimiterVerdict } from '../limiter/limiter.js';
import type { ExchangeTrace } from '../observe/tracing.js';
import type { ApplicableRestriction, QuotaChecks } from '../quota/quota-index.js';
import type { ExchangeRecord } from './record.js';

/** The quota check's span name (docs/tracing.md). */
export const quotaCheckSpan = 'quotagate.quota_check';

const nameOf = (restriction: ApplicableRestriction) => `${restriction.quotaId}/${restriction.index}`;

/**
 * Starts the span of a request's quota check (`admit`), under the server span, with the restrictions it
 * is checked against, each `<quota id>/<index>` as RateLimit-Policy names it. Null when the exchange is
 * not recorded: nothing is built for it.
 */
export function startQuotaCheck(trace: ExchangeTrace, checks: QuotaChecks): Span | null {
  if (!trace.recording) return null;
  const attributes: Attributes = {
    'quotagate.quota.restrictions': checks.restrictions.map(nameOf),
    'quotagate.quota.restriction_count': checks.restrictions.length,
  };
  if (checks.shadows.length > 0) attributes['quotagate.quota.shadows'] = checks.shadows.map(nameOf);
  return trace.child(quotaCheckSpan, 'internal', attributes);
}

/**
 * Ends the quota check's span with its decision: `admitted` or `refused` (and the code: 429
 * `quota_exceeded`, 503 `service_unavailable`, 413 `payload_too_large`), the restrictions that refused,
 * the room the tightest one has left, and whether the counter store made a trip to decide
 * (`quotagate.store.trip`: false when this gateway's counters or the leases it holds decided at once).
 * `verdict` is null for a body too large, decided without charging anything.
 */
export function endQuotaCheck(
  span: Span,
  record: ExchangeRecord,
  checks: QuotaChecks,
  verdict: LimiterVerdict | null,
  trip: boolean | null,
): void {
  const attributes: Attributes = {
    'quotagate.decision': record.refusedWith === null ? 'admitted' : 'refused',
  };
  if (trip !== null) attributes['quotagate.store.trip'] = trip;
  if (record.refusedWith !== null) attributes['quotagate.refusal.code'] = record.refusedWith;
  if (record.quota !== null) attributes['quotagate.quota'] = record.quota;
  if (record.refusedBy !== null) attributes['quotagate.refused_by'] = record.refusedBy;
  if (verdict !== null && verdict !== 'unavailable' && verdict.states.length > 0) {
    const states = checks.statesOf(verdict.states);
    let remaining = Infinity;
    checks.restrictions.forEach((restriction, i) => {
      const used = states[i]?.used;
      if (used !== undefined) remaining = Math.min(remaining, Math.max(0, restriction.limit - used));
    });
    if (remaining !== Infinity) attributes['quotagate.ratelimit.remaining'] = remaining;
  }
  const { fields } = record;
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i] === 'ratelimit-policy') attributes['quotagate.ratelimit.policy'] = fields[i + 1]!;
    else if (fields[i] === 'ratelimit') attributes['quotagate.ratelimit'] = fields[i + 1]!;
  }
  span.setAttributes(attributes);
  span.end();
}
