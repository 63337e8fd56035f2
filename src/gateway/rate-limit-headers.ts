import type { ApplicableRestriction } from '../quota/quota-index.js';
import type { CounterState } from '../limiter/counter-store.js';
import { integerText } from '../kit/integer-text.js';

/**
 * The most items a `RateLimit` or `RateLimit-Policy` field carries: one per restriction that applies, up
 * to this many, so that a quota of many restrictions cannot grow the response head without bound (an
 * item is at most about 90 bytes: 10 make under 1 KB a field). Beyond it, the restrictions with the
 * most room left (relative to their limit) are left out first.
 */
export const maxRateLimitItems = 10;

/**
 * The restriction's item name and `RateLimit-Policy` item, made once per restriction, and for a calendar
 * window once per length of window (`windowMs`).
 */
interface Policy {
  name: string;
  policy: string;
  windowMs: number;
}

const policies = new WeakMap<ApplicableRestriction, Policy>();

/** `w`: the window's length; a calendar window's is the current one's, which the store said. */
const windowOf = (windowMs: number) => `;w=${Math.ceil(windowMs / 1000)}`;

/**
 * The `w` and `qu` parameters of a policy item, by restriction type: `requests` is the draft's default
 * unit; `units` is a vendor value, what the upstream says each exchange cost; a concurrency restriction
 * has no window, so no `w`, and the draft's `concurrent-requests` unit.
 */
const windowAndUnit: Record<ApplicableRestriction['type'], (windowMs: number) => string> = {
  throttle: windowOf,
  throttlemb: (windowMs) => `${windowOf(windowMs)};qu="content-bytes"`,
  throttleunits: (windowMs) => `${windowOf(windowMs)};qu="units"`,
  concurrency: () => ';qu="concurrent-requests"',
};

function policyOf(restriction: ApplicableRestriction, state: CounterState): Policy {
  const windowMs = state.windowMs ?? restriction.windowMs;
  let known = policies.get(restriction);
  if (!known || known.windowMs !== windowMs) {
    const name = `"${restriction.quotaId}/${restriction.index}"`;
    const policy = `${name};q=${restriction.limit}${windowAndUnit[restriction.type](windowMs)}`;
    known = { name, policy, windowMs };
    policies.set(restriction, known);
  }
  return known;
}

/**
 * The `RateLimit` item of one restriction: `r` units remaining, `t` the seconds until more quota is made
 * available (the draft's words), rounded up as Retry-After is: until the oldest counted units leave the
 * window, or for a counter that refused the request, until it has room for it, which is the Retry-After
 * of that refusal; for a calendar window, until its end, when all of it is there again. A counter keeps the last 101 sub-buckets of 1/100 of the window, so its oldest units
 * stay counted up to one sub-bucket past the window: `t` may be up to `w` + `w`/100, never less than the
 * exact wait, so a client that waits `t` is never early. A concurrency restriction's `r` is the slots
 * free, and its `t` is 1 while none is (its Retry-After: a slot frees when any request ends), else 0.
 */
function rateLimitItem(restriction: ApplicableRestriction, state: CounterState, policy: Policy): string {
  const remaining = Math.max(0, restriction.limit - state.used);
  return `${policy.name};r=${integerText(remaining)};t=${Math.ceil(state.resetMs / 1000)}`;
}

/** The items' order and each one's room left relative to its limit (0 is full), reused by every call. */
const order: number[] = [];
const rooms: number[] = [];

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
  // An insertion sort by room left, ties in the quota's order: a few restrictions, no closure, no splice.
  for (let i = 0; i < count; i += 1) {
    const { limit } = restrictions[i]!;
    const room = (limit - states[i]!.used) / limit;
    let at = i;
    for (; at > 0 && rooms[at - 1]! > room; at -= 1) {
      order[at] = order[at - 1]!;
      rooms[at] = rooms[at - 1]!;
    }
    order[at] = i;
    rooms[at] = room;
  }
  let policyValue = '';
  let rateLimitValue = '';
  for (let k = 0; k < count && k < maxRateLimitItems; k += 1) {
    const i = order[k]!;
    const policy = policyOf(restrictions[i]!, states[i]!);
    const separator = k === 0 ? '' : ', ';
    policyValue += separator + policy.policy;
    rateLimitValue += separator + rateLimitItem(restrictions[i]!, states[i]!, policy);
  }
  fields.push('ratelimit-policy', policyValue, 'ratelimit', rateLimitValue);
}
