import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { LiveConfig } from '../config/live-config.js';
import type { Clock } from '../kit/clock.js';
import { cloudEvent, WebhookSender, type DeliveryResult } from '../notifications/webhook-sender.js';
import type { Logger } from '../observe/log.js';
import type { Metrics } from '../observe/metrics.js';
import { AdminError, errorResponses } from './admin-errors.js';

export const testEventType = 'quotagate.notification.test';

const testBody = z
  .strictObject(
    {
      url: z.string({ error: 'must be a string' }).optional().meta({
        description: 'The one webhook to send to (its url in notifications.webhooks); all without it',
      }),
    },
    { error: 'must be an object' },
  )
  .optional();

const testAnswer = z.object({
  id: z.string().meta({ description: "The test event's id (the same for every webhook)" }),
  results: z.array(
    z.object({
      url: z.string(),
      delivered: z.boolean().meta({ description: 'Whether the webhook answered with a 2xx' }),
      status: z
        .number()
        .int()
        .optional()
        .meta({ description: "The webhook's HTTP status, when it answered" }),
      error: z
        .string()
        .optional()
        .meta({ description: 'Why there was no answer (ECONNREFUSED, timed out…), when there was none' }),
    }),
  ),
});

export interface NotificationRouteParts {
  live: LiveConfig;
  logger: Logger;
  metrics: Metrics;
  /** The test events' clock (`time`) and their attempts' timeouts. */
  clock: Clock;
}

/**
 * `POST /notifications/test` (API Administrators): sends one `quotagate.notification.test` event to every
 * webhook of `notifications` (or the one named by `url`), signed as alerts are, once each and without
 * retries, and answers what each said, so an operator checks a receiver and its secret before an alert
 * depends on them.
 */
export function registerNotificationRoutes(app: FastifyInstance, parts: NotificationRouteParts): void {
  const sender = new WebhookSender({ timers: parts.clock, metrics: parts.metrics, logger: parts.logger });
  app.addHook('onClose', () => sender.close());
  app.post(
    '/notifications/test',
    {
      schema: {
        summary: 'Send a test event to the webhooks of notifications, and say what each answered',
        operationId: 'testNotifications',
        tags: ['notifications'],
        body: testBody,
        response: {
          200: {
            description: "Each webhook's answer to one attempt (a failing webhook is not retried)",
            ...(z.toJSONSchema(testAnswer, { io: 'output', target: 'openapi-3.0' }) as Record<
              string,
              unknown
            >),
          },
          ...errorResponses,
        },
      },
    },
    async (request: FastifyRequest<{ Body: z.output<typeof testBody> }>) => {
      if (request.adminUser?.role !== 'admin')
        throw new AdminError(403, ['only an API Administrator may send test events']);
      const url = request.body?.url;
      const { webhooks } = parts.live.config.notifications;
      const chosen = url === undefined ? webhooks : webhooks.filter((webhook) => webhook.url === url);
      if (url !== undefined && chosen.length === 0)
        throw new AdminError(404, [`no webhook of notifications.webhooks has the url '${url}'`]);
      const event = cloudEvent(
        testEventType,
        { message: 'A test event sent from the admin API', user: request.adminUser.username },
        parts.clock.now(),
      );
      const results: DeliveryResult[] = await Promise.all(
        chosen.map((webhook) => sender.deliverNow(webhook, event)),
      );
      return { id: event.id, results };
    },
  );
}
