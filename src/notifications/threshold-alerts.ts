import { dateAt } from '../kit/clock.js';
import type { CounterState } from '../limiter/counter-store.js';
import type { Logger } from '../observe/log.js';
import type { ApplicableRestriction } from '../quota/quota-index.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { cloudEvent, type Webhook, type WebhookSender } from './webhook-sender.js';

export const thresholdEventType = 'quotagate.quota.threshold';

/** The `data` of a `quotagate.quota.threshold` event. */
export interface ThresholdData {
  /** The application whose admitted request brought the count to the threshold; null without one. */
  application: string | null;
  /** The quota: its id, and its name (its id when another quota has the same name). */
  quota: { id: string; name: string };
  restriction: { index: number; type: ApplicableRestriction['type'] };
  /** The percentage of `limit` crossed. */
  threshold: number;
  /** Units counted in the window when the gateway saw the crossing (messages, bytes or units). */
  used: number;
  limit: number;
  /** When the window the crossing belongs to ends (`windowEndOf`), ISO 8601. */
  windowEnd: string;
}

/**
 * Claims the one event of a key, fleet-wide: true for the one claimer that sends it. Asked once per key
 * by each gateway (the rest is remembered here), so it is never a trip per request.
 */
export type ClaimEvent = (key: string, ttlMs: number) => Promise<boolean>;

/**
 * The fleet's claims in Redis: `SET <prefix>alert:<key> 1 NX PX <ms to the window's end>`, won by the
 * first gateway to ask. One key per command, so it runs on Redis Cluster on any slot.
 */
export function redisClaims(redis: RedisConnection, prefix: string): ClaimEvent {
  return async (key, ttlMs) =>
    (await redis.set(`${prefix}alert:${key}`, '1', 'PX', Math.max(1, ttlMs), 'NX')) === 'OK';
}

/**
 * The end of the window a crossing at `now` belongs to. A sliding window has no fixed end: every unit
 * counted at `now` has left it by `now + windowMs`, so its end is that time rounded up to a multiple of
 * the window (from the epoch), which every crossing within one window's length names alike, on every
 * gateway. So a count that stays above a threshold is told once per window length, and one that falls
 * below and crosses again in the next window is told again.
 */
export function windowEndOf(windowMs: number, now: number): number {
  return Math.ceil((now + windowMs) / windowMs) * windowMs;
}

export interface ThresholdAlertsOptions {
  /** The webhooks in force (a reload changes them). */
  webhooks: () => readonly Webhook[];
  sender: Pick<WebhookSender, 'enqueue'>;
  /** The fleet's claims (Redis); null when this process is the only one that counts (memory store). */
  claim: ClaimEvent | null;
  logger: Logger;
}

/** Keys claimed (or asked about) kept at once before the expired ones are swept. */
const sweepAbove = 4096;

/**
 * Watches the counters' states of each admitted request for a restriction's count reaching a threshold
 * (a percentage of its limit) and sends one `quotagate.quota.threshold` event per threshold per window
 * per counter (per application for an application's quota): the first decision that sees the count at or
 * past the threshold claims it, here in a set of keys kept until the window's end and, on Redis, with the
 * fleet's `claim`, which one gateway wins. The request never waits: the claim and the delivery go on
 * after it is answered.
 *
 * A gateway whose leases decide sees the fleet's count only at its trips, so an event may come a few
 * requests late, never twice; the count includes units leased to gateways and not yet spent.
 */
export class ThresholdAlerts {
  /** Keys this gateway has claimed or asked the fleet about, with the end of their window. */
  private readonly seen = new Map<string, number>();
  private sweepAt = sweepAbove;

  constructor(private readonly options: ThresholdAlertsOptions) {}

  /**
   * Looks at the decision that admitted a request: `restrictions` (enforced) with the position of their
   * counter among `specs` and `states`, for `application`, at `now`.
   */
  observe(
    restrictions: readonly ApplicableRestriction[],
    counterOf: readonly number[],
    states: readonly CounterState[],
    application: string | undefined,
    now: number,
  ): void {
    const webhooks = this.options.webhooks();
    if (webhooks.length === 0) return;
    for (let i = 0; i < restrictions.length; i += 1) {
      const restriction = restrictions[i]!;
      const state = states[counterOf[i]!];
      // A concurrency restriction counts requests in flight, not a window's use.
      if (!state || restriction.windowMs === 0) continue;
      const thresholds = restriction.alertThresholds ?? unionOf(webhooks);
      for (const threshold of thresholds) {
        if (state.used * 100 < threshold * restriction.limit) break;
        this.crossed(restriction, threshold, state, application, now, webhooks);
      }
    }
  }

  private crossed(
    restriction: ApplicableRestriction,
    threshold: number,
    { used, windowEnd }: CounterState,
    application: string | undefined,
    now: number,
    webhooks: readonly Webhook[],
  ): void {
    // A calendar window's end is fixed, and its counter's state says it.
    const end = windowEnd ?? windowEndOf(restriction.windowMs, now);
    const key = `${restriction.counterKey}:${restriction.index}:${threshold}:${end}`;
    if (this.seen.has(key)) return;
    this.remember(key, end, now);
    const data: ThresholdData = {
      application: application ?? null,
      quota: { id: restriction.quotaId, name: restriction.quotaLabel },
      restriction: { index: restriction.index, type: restriction.type },
      threshold,
      used,
      limit: restriction.limit,
      windowEnd: dateAt(end).toISOString(),
    };
    const send = () => {
      const event = cloudEvent(thresholdEventType, data, now);
      for (const webhook of webhooks) {
        // A quota's own thresholds go to every webhook; else each gets the ones it lists.
        if (restriction.alertThresholds || webhook.thresholds.includes(threshold))
          this.options.sender.enqueue(webhook, event);
      }
    };
    const { claim, logger } = this.options;
    if (!claim) return send();
    claim(key, end - now).then(
      (won) => {
        if (won) send();
      },
      (error: unknown) => {
        // Unclaimed, nothing is sent: an alert twice would be worse than one a store outage lost.
        logger.warn(
          { err: error, threshold, quota: restriction.quotaId },
          'cannot claim an alert in the store',
        );
      },
    );
  }

  /** Keeps `key` until its window ends; the expired ones go once many are kept. */
  private remember(key: string, end: number, now: number): void {
    this.seen.set(key, end);
    if (this.seen.size <= this.sweepAt) return;
    for (const [kept, until] of this.seen) if (until <= now) this.seen.delete(kept);
    this.sweepAt = Math.max(sweepAbove, this.seen.size * 2);
  }
}

const unions = new WeakMap<readonly Webhook[], number[]>();

/** Every threshold some webhook lists, ascending; made once per list of webhooks. */
function unionOf(webhooks: readonly Webhook[]): readonly number[] {
  let union = unions.get(webhooks);
  if (!union) {
    union = [...new Set(webhooks.flatMap((webhook) => webhook.thresholds))].sort((a, b) => a - b);
    unions.set(webhooks, union);
  }
  return union;
}
