import type { ApplicableRestriction } from '../quota/quota-index.js';
import type { CounterState } from './counter-store.js';

/**
 * The most items a `RateLimit` or `RateLimit-Policy` field carries: one per restriction that applies, up
 * to this many, so that a quota of many restrictions cannot grow the response head without bound (an
 * item is at most about 90 bytes: 10 make under 1 KB a field). Beyond it, the restrictions with the
 * most room left (relative to their limit) are left out first.
 */
export const maxRateLimitItems = 10;

/** The restriction's item name, `RateLimit-Policy` item and window in seconds, made once per restriction. */
interface Policy {
  name: string;
  policy: string;
  windowSeconds: number;
}

const policies = new WeakMap<ApplicableRestriction, Policy>();

function policyOf(restriction: ApplicableRestriction): Policy {
  let known = policies.get(restriction);
  if (!known) {
    const name = `"${restriction.quotaId}/${restriction.index}"`;
    const unit = restriction.type === 'throttlemb' ? ';qu="content-bytes"' : '';
    const windowSeconds = Math.ceil(restriction.windowMs / 1000);
    known = { name, policy: `${name};q=${restriction.limit};w=${windowSeconds}${unit}`, windowSeconds };
    policies.set(restriction, known);
  }
  return known;
}

/**
 * The `RateLimit` item of one restriction: `r` units remaining, `t` seconds until the oldest counted units
 * leave the window. A counter keeps the last 101 sub-buckets of 1/100 of the window, so its oldest units
 * may stay counted up to one sub-bucket past the window; `t` is never more than `w` all the same, as the
 * draft has it (Retry-After gives the exact wait of a refused request).
 */
function rateLimitItem(restriction: ApplicableRestriction, state: CounterState, policy: Policy): string {
  const remaining = Math.max(0, restriction.limit - state.used);
  const resetSeconds = Math.min(policy.windowSeconds, Math.ceil(state.resetMs / 1000));
  return `${policy.name};r=${remaining};t=${resetSeconds}`;
}

/** Room left relative to the limit: 0 is full. */
const roomOf = (restriction: ApplicableRestriction, state: CounterState | undefined): number =>
  (restriction.limit - (state?.used ?? 0)) / restriction.limit;

/** Indexes of the restrictions in the order their items go, reused by every call (it never yields). */
const order: number[] = [];

/**
 * Appends `RateLimit-Policy` and `RateLimit` (IETF httpapi draft "RateLimit header fields for HTTP") to
 * `fields` (name, value pairs): one item per restriction of `states`, the closest to its limit first, at
 * most `maxRateLimitItems`. Each field is a List: one line, items separated by commas.
 */
export function appendRateLimitFields(
  fields: string[],
  restrictions: readonly ApplicableRestriction[],
  states: readonly CounterState[],
): void {
  const count = Math.min(restrictions.length, states.length);
  if (count === 0) return;
  if (count === 1) {
    const policy = policyOf(restrictions[0]!);
    fields.push(
      'ratelimit-policy',
      policy.policy,
      'ratelimit',
      rateLimitItem(restrictions[0]!, states[0]!, policy),
    );
    return;
  }
  // Insertion by room left, ties in the quota's order: a few restrictions, so no sort with a closure.
  order.length = 0;
  for (let i = 0; i < count; i += 1) {
    const room = roomOf(restrictions[i]!, states[i]);
    let at = order.length;
    while (at > 0 && roomOf(restrictions[order[at - 1]!]!, states[order[at - 1]!]) > room) at -= 1;
    order.splice(at, 0, i);
  }
  let policyValue = '';
  let rateLimitValue = '';
  for (let k = 0; k < order.length && k < maxRateLimitItems; k += 1) {
    const i = order[k]!;
    const policy = policyOf(restrictions[i]!);
    const separator = k === 0 ? '' : ', ';
    policyValue += separator + policy.policy;
    rateLimitValue += separator + rateLimitItem(restrictions[i]!, states[i]!, policy);
  }
  fields.push('ratelimit-policy', policyValue, 'ratelimit', rateLimitValue);
}
