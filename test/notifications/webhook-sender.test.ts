import { afterEach, describe, expect, it } from 'vitest';
import { AddedLatency } from '../../src/observe/added-latency.js';
import { createMetrics, type Metrics } from '../../src/observe/metrics.js';
import {
  cloudEvent,
  deliveryAttempts,
  queuedPerEndpoint,
  retryDelayMs,
  WebhookSender,
  type Webhook,
} from '../../src/notifications/webhook-sender.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { capturingLogger } from '../helpers/log-capture.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const secret = 'receiver-secret-0123456789';
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function senderTo(receiver: WebhookReceiver, random = () => 0) {
  const timers = new FakeTimers();
  const metrics = createMetrics({ addedLatency: new AddedLatency() });
  const { logger, lines } = capturingLogger();
  const sender = new WebhookSender({ timers, metrics, logger, random });
  cleanups.push(() => sender.close());
  const webhook: Webhook = { url: receiver.url, secret, thresholds: [80, 100] };
  return { timers, metrics, sender, webhook, lines };
}

async function receiverWith(answer: WebhookReceiver['answer'] = 200) {
  const receiver = await startWebhookReceiver(secret);
  receiver.answer = answer;
  cleanups.push(() => receiver.close());
  return receiver;
}

const sent = async (metrics: Metrics, result: string) =>
  (await metrics.notificationsSent.get()).values.find((value) => value.labels.result === result)?.value ?? 0;

/** Waits until `retries` attempts have failed: the last one's retry is then the only timer left. */
const retried = (metrics: Metrics, retries: number) =>
  expect.poll(() => sent(metrics, 'retried')).toBe(retries);

describe('WebhookSender', () => {
  it('POSTs the CloudEvent as application/cloudevents+json, signed with the HMAC-SHA256 of its body', async () => {
    const receiver = await receiverWith();
    const { sender, webhook, metrics } = await senderTo(receiver);
    const event = cloudEvent('quotagate.quota.threshold', { threshold: 80 }, Date.UTC(2026, 10, 29));
    sender.enqueue(webhook, event);
    await expect.poll(() => receiver.delivered.length).toBe(1);
    const [received] = receiver.delivered;
    expect(received!.signed).toBe(true);
    expect(received!.contentType).toBe('application/cloudevents+json');
    expect(received!.event).toEqual({
      specversion: '1.0',
      id: event.id,
      source: 'quotagate',
      type: 'quotagate.quota.threshold',
      time: '2026-11-29T00:00:00.000Z',
      datacontenttype: 'application/json',
      data: { threshold: 80 },
    });
    expect(event.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await sent(metrics, 'delivered')).toBe(1);
  });

  it('retries an endpoint that refuses connections, then answers 500, until it takes the event', async () => {
    const receiver = await receiverWith(500);
    await receiver.stop();
    const { sender, webhook, timers, metrics } = await senderTo(receiver);
    sender.enqueue(webhook, cloudEvent('quotagate.quota.threshold', { n: 1 }, 0));
    await retried(metrics, 1);
    expect(timers.waiting()).toEqual([10_000]);
    expect(receiver.attempts).toHaveLength(0);

    await receiver.open();
    timers.advance(10_000);
    await expect.poll(() => receiver.attempts.length).toBe(1);
    await retried(metrics, 2);
    expect(timers.waiting()).toEqual([20_000]);
    expect(receiver.delivered).toHaveLength(0);

    receiver.answer = 200;
    timers.advance(20_000);
    await expect.poll(() => receiver.delivered.length).toBe(1);
    expect(receiver.delivered[0]!.signed).toBe(true);
    expect(await sent(metrics, 'retried')).toBe(2);
    expect(await sent(metrics, 'delivered')).toBe(1);
    expect(sender.queued(webhook.url)).toBe(0);
  });

  it('gives an alert up after 10 attempts spread over about an hour, logging the URL without its query', async () => {
    const receiver = await receiverWith(503);
    const { sender, webhook, timers, metrics, lines } = await senderTo(receiver);
    const withToken = { ...webhook, url: `${receiver.url}?token=receiver-token` };
    sender.enqueue(withToken, cloudEvent('quotagate.quota.threshold', {}, 0));
    let waited = 0;
    for (let attempt = 1; attempt < deliveryAttempts; attempt += 1) {
      await retried(metrics, attempt);
      const [delay] = timers.waiting();
      waited += delay!;
      timers.advance(delay!);
      await expect.poll(() => receiver.attempts.length).toBe(attempt + 1);
    }
    await expect.poll(() => sent(metrics, 'given_up')).toBe(1);
    expect(receiver.attempts).toHaveLength(10);
    expect(await sent(metrics, 'retried')).toBe(9);
    expect(waited).toBe(3_670_000);
    expect(timers.waiting()).toEqual([]);
    const givenUp = lines.find((line) => line.msg === 'alert not delivered, given up');
    expect(givenUp).toMatchObject({ url: receiver.url, said: 'status 503' });
    expect(JSON.stringify(lines)).not.toContain('receiver-token');
  });

  it('spreads the retries by up to a tenth more at random', () => {
    expect(retryDelayMs(1, () => 0)).toBe(10_000);
    expect(retryDelayMs(1, () => 0.999)).toBe(10_999);
    expect(retryDelayMs(9, () => 0)).toBe(1_200_000);
    const longest = Array.from({ length: 9 }, (_unused, i) => retryDelayMs(i + 1, () => 0.999));
    expect(longest.reduce((sum, delay) => sum + delay, 0)).toBeLessThan(70 * 60_000);
  });

  it('keeps at most 1000 alerts for an endpoint that is down, dropping the oldest and counting them', async () => {
    const receiver = await receiverWith();
    await receiver.stop();
    const { sender, webhook, timers, metrics } = await senderTo(receiver);
    for (let n = 0; n < queuedPerEndpoint + 5; n += 1)
      sender.enqueue(webhook, cloudEvent('quotagate.quota.threshold', { n }, 0));
    await retried(metrics, 1);
    expect(sender.queued(webhook.url)).toBe(queuedPerEndpoint);
    expect((await metrics.notificationsDropped.get()).values[0]!.value).toBe(5);

    await receiver.open();
    timers.advance(10_000);
    await expect.poll(() => receiver.delivered.length, { timeout: 20_000 }).toBe(queuedPerEndpoint);
    // The head in flight when the queue was full went first: the oldest waiting ones were dropped.
    expect(receiver.delivered.map((received) => received.event.data.n)).toEqual(
      Array.from({ length: queuedPerEndpoint }, (_unused, i) => i + 5),
    );
  });
});
