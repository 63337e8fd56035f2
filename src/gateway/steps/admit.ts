import type { IncomingMessage } from 'node:http';
import type { Span } from '@opentelemetry/api';
import type { CounterSpec } from '../../limiter/counter-store.js';
import type { LimiterVerdict } from '../../limiter/limiter.js';
import type { QuotaChecks } from '../../quota/quota-index.js';
import { countedFields, repeatedCallerField } from '../../upstream/fields/caller-keys.js';
import { refuse } from '../answers/refusal.js';
import { endQuotaCheck, startQuotaCheck } from '../quota-check-span.js';
import { appendRateLimitFields } from '../rate-limit-headers.js';
import type { ExchangeRecord } from '../record.js';
import { isPromise, type Next, type StepContext } from './context.js';
import { callerIn, counterRefs, refuseRepeatedCallerField } from './usage.js';

/** The verdict on a request that only shadow restrictions apply to. */
const nothingToCheck: LimiterVerdict = { allowed: true, retryAfterMs: 0, states: [] };

/**
 * Step 5: selects the restrictions of the request (its API, method, verb and application; by caller
 * where a quota counts so), refuses a body no window could hold (413), consumes the enforced ones (429,
 * or 503 when the store cannot decide), with the RateLimit fields of the verdict, and takes its
 * concurrency slots; then its shadow restrictions count it. A promise only when the store has to wait.
 */
export function admit(context: StepContext, record: ExchangeRecord): Next {
  const { req, route, principal } = record;
  const verb = req.method ?? 'GET';
  const application = principal?.application;
  const selected = context
    .quotas()
    .checksFor(route!.api.config.id, route!.method?.id ?? null, verb === 'HEAD' ? 'GET' : verb, application);
  const repeated = selected.byCaller ? repeatedCallerField(req, selected.all) : undefined;
  if (repeated !== undefined) return refuseRepeatedCallerField(record, repeated);
  if (selected.byCaller) record.countedFields = countedFields(selected.all);
  const checks = selected.byCaller
    ? selected.forCaller((restriction) =>
        context.callers.counted(
          restriction.counterKey,
          application,
          callerIn(record, restriction),
          restriction.windowMs,
        ),
      )
    : selected;
  if (checks.all.length === 0) return true;
  const span = record.trace === null ? null : startQuotaCheck(record.trace, checks);
  record.declaredBytes = declaredLength(req);
  // A body larger than a whole window's bytes can never fit: no Retry-After would help.
  if (record.declaredBytes > checks.largestBody) return refuseTooLarge(context, record, checks, span);
  const specs = checks.specs(record.declaredBytes);
  const verdict = specs.length === 0 ? nothingToCheck : context.limiter.consume(specs);
  // A promise is the store's trip (or a trip for a lease already on its way, which this check waits for).
  if (isPromise(verdict))
    return verdict.then((settled) => checked(context, record, checks, specs, settled, span, true));
  return checked(context, record, checks, specs, verdict, span, false);
}

/** The verdict applied, the quota check's span ended (when traced), then the shadow restrictions. */
function checked(
  context: StepContext,
  record: ExchangeRecord,
  checks: QuotaChecks,
  specs: readonly CounterSpec[],
  verdict: LimiterVerdict,
  span: Span | null,
  trip: boolean,
): Next {
  const goesOn = admitted(context, record, checks, specs, verdict);
  if (span !== null) endQuotaCheck(span, record, checks, verdict, trip);
  return goesOn && shadows(context, record, checks);
}

/** Applies a counter verdict: adds the rate-limit fields, and answers 429 or 503 itself when it must. */
export function admitted(
  context: StepContext,
  record: ExchangeRecord,
  checks: QuotaChecks,
  specs: readonly CounterSpec[],
  verdict: LimiterVerdict,
): boolean {
  if (verdict === 'unavailable') {
    record.quota = 'unavailable';
    refuse(record, 'service_unavailable');
    return false;
  }
  if (verdict.outOfRoom) {
    // This gateway's counters are at their memory bound: a caller without a counter cannot be counted.
    record.quota = 'unavailable';
    refuse(record, 'service_unavailable', ['retry-after', String(Math.ceil(verdict.retryAfterMs / 1000))]);
    return false;
  }
  const { restrictions, counterOf } = checks;
  for (let i = 0; i < restrictions.length; i += 1) {
    const restriction = restrictions[i]!;
    const counter = counterOf[i]!;
    const full = (verdict.states[counter]?.used ?? 0) + specs[counter]!.need > restriction.limit;
    if (verdict.allowed || full) context.metrics.quotaDecision(restriction, verdict.allowed);
    if (!verdict.allowed && full) record.addRefusal(restriction);
  }
  appendRateLimitFields(record.fields, restrictions, checks.statesOf(verdict.states));
  if (!verdict.allowed) {
    record.quota = 'rejected';
    const retryAfter = String(Math.max(1, Math.ceil(verdict.retryAfterMs / 1000)));
    refuse(record, 'quota_exceeded', ['retry-after', retryAfter]);
    return false;
  }
  record.quota = 'allowed';
  context.alerts?.observe(
    restrictions,
    counterOf,
    verdict.states,
    record.principal?.application,
    context.clock.now(),
  );
  record.byteCounters = checks.byteRestrictions;
  if (checks.byteRestrictions.length > 0) record.byteStates = checks.byteStatesOf(verdict.states);
  record.unitCounters = checks.unitRestrictions;
  record.holdSlots(verdict.slotsFreedBy, checks.slotKeys);
  return true;
}

/** An admitted request's shadow restrictions count it; a promise only when the store has to wait. */
function shadows(context: StepContext, record: ExchangeRecord, checks: QuotaChecks): Next {
  if (checks.shadows.length === 0) return true;
  // Each on its own: one that would refuse must not keep another from counting what it admits.
  const verdicts = checks.shadowChecks(record.declaredBytes).map((check) => context.limiter.consume(check));
  if (verdicts.some(isPromise)) {
    return Promise.all(verdicts).then((settled) => {
      shadowed(context, record, checks, settled);
      return true;
    });
  }
  shadowed(context, record, checks, verdicts as LimiterVerdict[]);
  return true;
}

/**
 * Applies the verdicts of the shadow restrictions: what one would have refused is logged and counted,
 * and the request goes on all the same. A store that cannot decide leaves a shadow restriction silent;
 * one whose counter found no room under the memory bound is counted as such.
 */
export function shadowed(
  context: StepContext,
  record: ExchangeRecord,
  checks: QuotaChecks,
  verdicts: readonly LimiterVerdict[],
): void {
  for (let i = 0; i < verdicts.length; i += 1) {
    const verdict = verdicts[i]!;
    const restriction = checks.shadows[i]!;
    if (verdict === 'unavailable') continue;
    if (verdict.outOfRoom) {
      context.metrics.shadowUncounted(restriction);
      continue;
    }
    if (verdict.allowed) {
      if (restriction.type === 'throttlemb') record.byteCounters = [...record.byteCounters, restriction];
      if (restriction.type === 'throttleunits') record.unitCounters = [...record.unitCounters, restriction];
      if (restriction.type === 'concurrency')
        record.holdSlots(verdict.slotsFreedBy, [restriction.counterKey]);
      continue;
    }
    context.metrics.shadowRefusal(restriction);
    record.quota = 'shadow_refused';
    record.addRefusal(restriction);
  }
}

/**
 * Answers 413 to a declared body larger than the whole window of a byte restriction: with the RateLimit
 * fields of every restriction it is too large for, read from their counters without charging them
 * (none when the store cannot be read), and a message that names the smallest.
 */
async function refuseTooLarge(
  context: StepContext,
  record: ExchangeRecord,
  checks: QuotaChecks,
  span: Span | null,
): Promise<false> {
  const declared = record.declaredBytes;
  // Each restriction by its own limit, twins included (they share a counter under the tightest limit).
  const tooSmall = checks.restrictions.filter(
    (restriction) => restriction.type === 'throttlemb' && restriction.limit < declared,
  );
  const fields: string[] = [];
  try {
    appendRateLimitFields(fields, tooSmall, await context.limiter.peek(counterRefs(tooSmall)));
  } catch (error) {
    context.logger.debug(
      { err: { message: (error as Error).message }, requestId: record.id },
      'cannot read the counters of a body too large from the store',
    );
  }
  if (record.res.destroyed) {
    span?.end();
    return false;
  }
  const smallest = tooSmall.reduce((least, restriction) =>
    restriction.limit < least.limit ? restriction : least,
  );
  const seconds = Math.ceil(smallest.windowMs / 1000);
  for (const restriction of tooSmall) record.addRefusal(restriction);
  refuse(
    record,
    'payload_too_large',
    fields,
    `a body of ${declared} bytes is more than restriction ${smallest.quotaId}/${smallest.index} allows in any ${seconds} seconds (${smallest.limit} bytes)`,
  );
  if (span !== null) endQuotaCheck(span, record, checks, null, null);
  return false;
}

/**
 * The request's declared body length, or 0 when it declares none (chunked). Node has framed the body by
 * the same digits, leading zeros and all; beyond 2^53 the number is approximate, and larger than any
 * limit anyway.
 */
function declaredLength(req: IncomingMessage): number {
  const header = req.headers['content-length'];
  return header !== undefined && /^\d+$/.test(header) ? Number(header) : 0;
}
