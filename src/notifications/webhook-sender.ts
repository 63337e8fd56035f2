import { createHmac, randomUUID } from 'node:crypto';
import { Agent, request } from 'undici';
import { dateAt, type Clock } from '../kit/clock.js';
import type { Logger } from '../observe/log.js';
import type { Metrics } from '../observe/metrics.js';

/** A receiver of alerts, as `notifications.webhooks` configures it. */
export interface Webhook {
  url: string;
  /** Key of the body's HMAC-SHA256 (`X-Quotagate-Signature`). */
  secret: string;
  /** Percentages of a limit whose crossing is sent here, ascending. */
  thresholds: readonly number[];
}

/** A CloudEvents 1.0 event in its JSON format (the spec's structured content mode). */
export interface CloudEvent<T = unknown> {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
  time: string;
  datacontenttype: 'application/json';
  data: T;
}

/** What every event names as its `source`: the gateway that sent it. */
export const eventSource = 'quotagate';

/**
 * The HTTP binding's structured mode: the body is the whole event, attributes and data, so a receiver
 * reads one JSON document and the signature covers every attribute (binary mode would carry them in
 * `ce-` headers, outside the signed body).
 */
export const eventContentType = 'application/cloudevents+json';

export const signatureHeader = 'x-quotagate-signature';

/** An event of `type` with `data`, stamped with a fresh id and the time `now` (ms since the epoch). */
export function cloudEvent<T>(type: string, data: T, now: number): CloudEvent<T> {
  return {
    specversion: '1.0',
    id: randomUUID(),
    source: eventSource,
    type,
    time: dateAt(now).toISOString(),
    datacontenttype: 'application/json',
    data,
  };
}

/** `sha256=<hex HMAC-SHA256 of body keyed by secret>`, as GitHub's `X-Hub-Signature-256`. */
export function signatureOf(body: string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** What one endpoint said to one attempt: its status, or why there was none. */
export interface DeliveryResult {
  url: string;
  delivered: boolean;
  status?: number;
  error?: string;
}

/** Attempts of one alert: the first, then nine retries spread over about an hour (`retryDelayMs`). */
export const deliveryAttempts = 10;
/** Alerts waiting for one endpoint; past it the oldest is dropped. */
export const queuedPerEndpoint = 1000;
/** Milliseconds an attempt may take, from connecting to the end of the answer. */
export const attemptTimeoutMs = 10_000;

const firstRetryMs = 10_000;
const longestRetryMs = 20 * 60_000;

/**
 * Milliseconds before retry `retry` (1 for the first): 10 s doubling, at most 20 min, plus up to a
 * tenth more at random, so that endpoints that failed together are not all tried again at once. The nine
 * retries of an alert wait about 61 to 67 minutes in all.
 */
export function retryDelayMs(retry: number, random: () => number): number {
  const delay = Math.min(longestRetryMs, firstRetryMs * 2 ** (retry - 1));
  return Math.round(delay * (1 + random() / 10));
}

export interface WebhookSenderOptions {
  /** The retries' and the attempts' timeouts (tests move them). */
  timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  metrics: Pick<Metrics, 'notificationsSent' | 'notificationsDropped'>;
  logger: Logger;
  /** The jitter of the retries: Math.random unless a test fixes it. */
  random?: () => number;
}

interface Queued {
  body: string;
  attempt: number;
}

/** One endpoint's alerts, delivered in order, one at a time: the head is retried while the rest wait. */
interface Endpoint {
  webhook: Webhook;
  queue: Queued[];
  busy: boolean;
  retryTimer: unknown;
}

/**
 * Delivers alerts to webhooks in the background: `enqueue` never waits, so the request that crossed a
 * threshold is answered whatever the endpoint does. Each endpoint has its own queue, bounded at
 * `queuedPerEndpoint` (the oldest dropped first, counted in `quotagate_notifications_dropped_total`); an
 * attempt that gets no 2xx within `attemptTimeoutMs` is tried again after `retryDelayMs`, up to
 * `deliveryAttempts` in all, and the alerts behind it wait, since an endpoint that failed one fails the
 * next. Alerts still queued when the gateway stops are lost.
 */
export class WebhookSender {
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly agent = new Agent({ connections: 2 });
  private readonly inFlight = new Set<AbortController>();
  private readonly random: () => number;
  private closed = false;

  constructor(private readonly options: WebhookSenderOptions) {
    this.random = options.random ?? Math.random;
  }

  /** Queues `event` for `webhook`; never waits, never throws. */
  enqueue(webhook: Webhook, event: CloudEvent): void {
    if (this.closed) return;
    let endpoint = this.endpoints.get(webhook.url);
    if (!endpoint) {
      endpoint = { webhook, queue: [], busy: false, retryTimer: null };
      this.endpoints.set(webhook.url, endpoint);
    }
    // A reload may have given the endpoint a new secret: the next attempt signs with it.
    endpoint.webhook = webhook;
    if (endpoint.queue.length >= queuedPerEndpoint) {
      endpoint.queue.shift();
      this.options.metrics.notificationsDropped.inc();
    }
    endpoint.queue.push({ body: JSON.stringify(event), attempt: 0 });
    this.next(endpoint);
  }

  /** Alerts waiting for `url`, the one being delivered included. */
  queued(url: string): number {
    return this.endpoints.get(url)?.queue.length ?? 0;
  }

  /** One attempt to deliver `event` now, without retries: what the admin API's test answers. */
  deliverNow(webhook: Webhook, event: CloudEvent): Promise<DeliveryResult> {
    return this.attempt(webhook, JSON.stringify(event));
  }

  /** Stops the retries, cuts the attempts in flight and closes the connections. */
  async close(): Promise<void> {
    this.closed = true;
    for (const endpoint of this.endpoints.values()) {
      if (endpoint.retryTimer !== null) this.options.timers.clearTimeout(endpoint.retryTimer);
      endpoint.queue.length = 0;
    }
    for (const controller of this.inFlight) controller.abort();
    await this.agent.close();
  }

  private next(endpoint: Endpoint): void {
    if (endpoint.busy || endpoint.retryTimer !== null || this.closed) return;
    const head = endpoint.queue[0];
    if (!head) return;
    endpoint.busy = true;
    head.attempt += 1;
    void this.attempt(endpoint.webhook, head.body).then((result) => {
      endpoint.busy = false;
      if (this.closed) return;
      this.settled(endpoint, head, result);
      this.next(endpoint);
    });
  }

  private settled(endpoint: Endpoint, head: Queued, result: DeliveryResult): void {
    const { metrics, logger } = this.options;
    const done = () => {
      const position = endpoint.queue.indexOf(head);
      if (position !== -1) endpoint.queue.splice(position, 1);
    };
    if (result.delivered) {
      metrics.notificationsSent.inc({ result: 'delivered' });
      return done();
    }
    const said = result.status === undefined ? result.error : `status ${result.status}`;
    if (head.attempt >= deliveryAttempts) {
      metrics.notificationsSent.inc({ result: 'given_up' });
      logger.warn({ url: shown(result.url), attempts: head.attempt, said }, 'alert not delivered, given up');
      return done();
    }
    metrics.notificationsSent.inc({ result: 'retried' });
    const delay = retryDelayMs(head.attempt, this.random);
    logger.info(
      { url: shown(result.url), attempt: head.attempt, said, retryInMs: delay },
      'alert not delivered',
    );
    endpoint.retryTimer = this.options.timers.setTimeout(() => {
      endpoint.retryTimer = null;
      this.next(endpoint);
    }, delay);
  }

  /** POSTs `body` once: delivered on a 2xx; never throws. */
  private async attempt(webhook: Webhook, body: string): Promise<DeliveryResult> {
    const controller = new AbortController();
    this.inFlight.add(controller);
    const { timers } = this.options;
    const timer = timers.setTimeout(() => controller.abort(new Error('timed out')), attemptTimeoutMs);
    try {
      const answer = await request(webhook.url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: {
          'content-type': eventContentType,
          [signatureHeader]: signatureOf(body, webhook.secret),
          'user-agent': 'quotagate',
        },
        body,
        signal: controller.signal,
      });
      await answer.body.dump();
      const status = answer.statusCode;
      return { url: webhook.url, delivered: status >= 200 && status < 300, status };
    } catch (error) {
      return { url: webhook.url, delivered: false, error: reasonOf(error) };
    } finally {
      timers.clearTimeout(timer);
      this.inFlight.delete(controller);
    }
  }
}

/** A webhook's URL as the log shows it: without its query, which may hold a receiver's token. */
const shown = (url: string): string => {
  const { origin, pathname } = new URL(url);
  return origin + pathname;
};

/** Why an attempt got no answer, in words that name no secret: the error's code, else its message. */
function reasonOf(error: unknown): string {
  const { code, message, cause } = error as { code?: string; message?: string; cause?: { code?: string } };
  return cause?.code ?? code ?? message ?? 'failed';
}
