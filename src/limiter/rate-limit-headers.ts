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
  restrictions.forEach((restriction, i) => {
    const room = (restriction.limit - (states[i]?.used ?? 0)) / restriction.limit;
    if (room < least) {
      least = room;
      closest = i;
    }
  });
  return closest;
}

/**
 * `RateLimit-Policy` and `RateLimit` (IETF httpapi draft "RateLimit header fields for HTTP") of one
 * restriction: quota units `q` per window `w` seconds, `r` units remaining, `t` seconds until the oldest
 * counted units leave the window.
 */
export function rateLimitHeaders(
  restriction: ApplicableRestriction,
  state: CounterState,
): Record<string, string> {
  const name = `"${restriction.quotaId}/${restriction.index}"`;
  const unit = restriction.type === 'throttlemb' ? ';qu="content-bytes"' : '';
  const windowSeconds = Math.ceil(restriction.windowMs / 1000);
  const remaining = Math.max(0, restriction.limit - state.used);
  return {
    'ratelimit-policy': `${name};q=${restriction.limit};w=${windowSeconds}${unit}`,
    ratelimit: `${name};r=${remaining};t=${Math.ceil(state.resetMs / 1000)}`,
  };
}
