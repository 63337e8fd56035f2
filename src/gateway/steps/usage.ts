import type { CounterRef } from '../../limiter/counter-store.js';
import {
  counterRefOf,
  onCallerCounters,
  type ApplicableRestriction,
  type CallerRestriction,
} from '../../quota/quota-index.js';
import { callerOf, repeatedCallerField } from '../../upstream/fields/caller-keys.js';
import { clientAddress } from '../../upstream/fields/forwarded.js';
import { answerJson, refuse } from '../answers/refusal.js';
import { appendRateLimitFields } from '../rate-limit-headers.js';
import type { ExchangeRecord } from '../record.js';
import { readings, tightest } from '../usage-endpoint.js';
import type { Next, StepContext } from './context.js';

/** The counters of `restrictions`, to read without charging them. */
export const counterRefs = (restrictions: readonly ApplicableRestriction[]): CounterRef[] =>
  restrictions.map(counterRefOf);

/** The caller of `record` under a restriction counted by caller, within its application. */
export function callerIn(record: ExchangeRecord, restriction: CallerRestriction): string {
  return `${restriction.callerScope}\n${callerOf(record.req, restriction.by, record.ruleSet.trustedPeers)}`;
}

/** Answers 400 to a request that names no one caller: it sends a field a quota counts by twice or more. */
export function refuseRepeatedCallerField(record: ExchangeRecord, field: string): false {
  const detail = `the ${field} field is sent more than once: a quota counts each of its values apart`;
  refuse(record, 'bad_request', [], detail);
  return false;
}

/**
 * Step 4 of a request to the usage path, its last (it is never forwarded): the authenticated caller's
 * own restrictions read from their counters, nothing charged, within the caller's read budget. Any other
 * request goes on.
 */
export function usage(context: StepContext, record: ExchangeRecord): Next {
  return record.readsUsage ? answerUsage(context, record) : true;
}

async function answerUsage(context: StepContext, record: ExchangeRecord): Promise<false> {
  const { req, res, ruleSet, principal } = record;
  const application = principal?.application;
  const caller = application ?? `client ${clientAddress(req, ruleSet.trustedPeers)}`;
  const waitMs = context.usageBudget.take(caller, context.clock.now());
  if (waitMs > 0) {
    refuse(record, 'quota_exceeded', ['retry-after', String(Math.ceil(waitMs / 1000))]);
    return false;
  }
  // The caller's own counts of restrictions counted by caller, as its next request would be counted.
  const own = context.quotas().restrictionsFor(application);
  const repeated = repeatedCallerField(req, own);
  if (repeated !== undefined) return refuseRepeatedCallerField(record, repeated);
  const restrictions = onCallerCounters(own, (restriction) =>
    context.callers.countedAs(restriction.counterKey, application, callerIn(record, restriction)),
  );
  let states;
  try {
    states = await context.limiter.peek(counterRefs(restrictions));
  } catch (error) {
    context.logger.warn({ err: { message: (error as Error).message } }, 'cannot read usage from the store');
    refuse(record, 'service_unavailable');
    return false;
  }
  if (res.destroyed) return false;
  const body = JSON.stringify({
    application:
      application === undefined ? null : { id: application, name: ruleSet.applications.nameOf(application) },
    restrictions: readings(restrictions, states, ruleSet.catalogNames),
  });
  const fields: string[] = [];
  const at = tightest(restrictions, states);
  if (at !== -1) appendRateLimitFields(fields, [restrictions[at]!], [states[at]!]);
  answerJson(record, fields, body);
  return false;
}
