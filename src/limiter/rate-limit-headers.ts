import type { ApplicableRestriction } from '../quota/quota-index.js';
import type { CounterState } from './counter-store.js';

/**
 * The restriction closest to its limit (least room left, relative to its limit): the one the
 * RateLimit headers describe.
 */
export function closestToLimit(
  restrictions: readonly ApplicableRestriction[],
  states: readonly CounterState[],
): number {
  let closest = 0;
  let least = Infinity;
  for (let i = 0; i < restrictions.length; i += 1) {
    const { limit } = restrictions[i]!;
    const room = (limit - (states[i]?.used ?? 0)) / limit;
    if (room < least) {
      least = room;
      closest = i;
    }
  }
  return closest;
}

/** The restriction's name and `RateLimit-Policy` value, made once per restriction (they never change). */
const policies = new WeakMap<ApplicableRestriction, { name: string; policy: string }>();

function policyOf(restriction: ApplicableRestriction): { name: string; policy: string } {
  let known = policies.get(restriction);
  if (!known) {
    const name = `"${restriction.quotaId}/${restriction.index}"`;
    const unit = restriction.type === 'throttlemb' ? ';qu="content-bytes"' : '';
    const windowSeconds = Math.ceil(restriction.windowMs / 1000);
    known = { name, policy: `${name};q=${restriction.limit};w=${windowSeconds}${unit}` };
    policies.set(restriction, known);
  }
  return known;
}

/**
 * Appends `RateLimit-Policy` and `RateLimit` (IETF httpapi draft "RateLimit header fields for HTTP") of
 * one restriction to `fields` (name, value pairs): quota units `q` per window `w` seconds, `r` units
 * remaining, `t` seconds until the oldest counted units leave the window.
 */
export function appendRateLimitFields(
  fields: string[],
  restriction: ApplicableRestriction,
  state: CounterState,
): void {
  const { name, policy } = policyOf(restriction);
  const remaining = Math.max(0, restriction.limit - state.used);
  fields.push(
    'ratelimit-policy',
    policy,
    'ratelimit',
    `${name};r=${remaining};t=${Math.ceil(state.resetMs / 1000)}`,
  );
}
