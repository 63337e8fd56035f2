import type { LiveConfig } from '../config/live-config.js';
import { redisClaims, ThresholdAlerts } from '../notifications/threshold-alerts.js';
import { WebhookSender } from '../notifications/webhook-sender.js';
import type { Metrics } from '../observe/metrics.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import type { Closers } from './closers.js';
import type { Env } from './env.js';

/** The alerts of a data plane: what watches its counts, and what delivers their events. */
export interface Notifications {
  alerts: ThresholdAlerts;
  sender: WebhookSender;
}

/**
 * Builds the threshold alerts of `notifications.webhooks` as a reload leaves them (read on each
 * crossing): claimed fleet-wide in Redis when the store is Redis, else in this process. The sender
 * closes before the store's connection, with what it still holds lost.
 */
export function createNotifications(
  live: LiveConfig,
  redis: RedisConnection | null,
  env: Env,
  metrics: Metrics,
  closers: Closers,
): Notifications {
  const logger = env.logger.child({ component: 'notifications' });
  const sender = new WebhookSender({ timers: env.clock, metrics, logger });
  closers.push('webhooks', () => sender.close());
  const { store } = live.config;
  const alerts = new ThresholdAlerts({
    webhooks: () => live.config.notifications.webhooks,
    sender,
    claim: redis && store.type === 'redis' ? redisClaims(redis, store.prefix) : null,
    logger,
  });
  return { alerts, sender };
}
