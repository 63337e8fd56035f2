import { afterEach, describe, expect, it } from 'vitest';
import { windowEndOf } from '../../src/notifications/threshold-alerts.js';
import {
  get,
  mobileId,
  mobileKey,
  startFleetOfTwo,
  useEnforcementGateways,
} from '../helpers/enforcement-gateways.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import {
  applicationDefaultQuotaId,
  petsConfig,
  startTestGateway,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const secret = 'alerts-secret-0123456789abcdef';
const minute = 60_000;

/** The Application Default quota of conf/: 10 calls a minute per application, with `extra` fields. */
const tenAMinute = (extra: Record<string, unknown> = {}) => ({
  quotas: [
    {
      id: applicationDefaultQuotaId,
      type: 'APPLICATION',
      name: 'Application Default',
      restrictions: [throttle(10, 1, 'minute')],
      ...extra,
    },
  ],
});

const receivers: WebhookReceiver[] = [];
afterEach(async () => {
  for (const receiver of receivers.splice(0)) await receiver.close();
});

async function receiver(): Promise<WebhookReceiver> {
  const started = await startWebhookReceiver(secret);
  receivers.push(started);
  return started;
}

const notifying = (url: string, thresholds?: number[]) => ({
  notifications: { webhooks: [{ url, secret, ...(thresholds ? { thresholds } : {}) }] },
});

/** What `/metrics` says of the alert deliveries of `result`. */
async function sentOf(gateway: TestGateway, result: string): Promise<number> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  const line = text
    .split('\n')
    .find((row) => row.startsWith(`quotagate_notifications_sent_total{result="${result}"}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

const thresholdsOf = (hook: WebhookReceiver) =>
  hook.delivered.map((received) => received.event.data.threshold);

describe('threshold alerts', () => {
  const suite = useEnforcementGateways();

  it('sends one signed event at 80% and one at 100% of a window, and both again in the next window', async () => {
    const hook = await receiver();
    const gateway = await suite.gatewayWith({ ...tenAMinute(), ...notifying(hook.url) });
    const statuses: number[] = [];
    for (let call = 0; call < 11; call += 1) statuses.push((await get(gateway, mobileKey)).status);
    expect(statuses).toEqual([...Array<number>(10).fill(200), 429]);
    await expect.poll(() => hook.delivered.length).toBe(2);
    expect(hook.delivered.every((received) => received.signed)).toBe(true);
    const [eighty, hundred] = hook.delivered.map((received) => received.event);
    expect(eighty).toMatchObject({
      specversion: '1.0',
      source: 'quotagate',
      type: 'quotagate.quota.threshold',
      datacontenttype: 'application/json',
      time: new Date(suite.clock.now).toISOString(),
      data: {
        application: mobileId,
        quota: { id: applicationDefaultQuotaId, name: 'Application Default' },
        restriction: { index: 0, type: 'throttle' },
        threshold: 80,
        used: 8,
        limit: 10,
        windowEnd: new Date(windowEndOf(minute, suite.clock.now)).toISOString(),
      },
    });
    expect(hundred!.data).toMatchObject({ threshold: 100, used: 10 });
    expect(eighty!.id).not.toBe(hundred!.id);

    suite.clock.now += minute + 1_000;
    for (let call = 0; call < 10; call += 1) expect((await get(gateway, mobileKey)).status).toBe(200);
    await expect.poll(() => hook.delivered.length).toBe(4);
    // Events of one endpoint arrive in order: a second event of the first window would have come before.
    expect(thresholdsOf(hook)).toEqual([80, 100, 80, 100]);
    const ends = hook.delivered.map((received) => received.event.data.windowEnd);
    expect(ends[2]).not.toBe(ends[0]);
    expect(hook.attempts).toHaveLength(4);
  });

  it("counts each application apart, and a quota's own thresholds replace the webhook's", async () => {
    const hook = await receiver();
    const gateway = await suite.gatewayWith({ ...tenAMinute({ thresholds: [50] }), ...notifying(hook.url) });
    for (let call = 0; call < 6; call += 1) await get(gateway, mobileKey);
    for (let call = 0; call < 5; call += 1) await get(gateway);
    await expect.poll(() => hook.delivered.length).toBe(2);
    expect(thresholdsOf(hook)).toEqual([50, 50]);
    expect(hook.delivered.map((received) => received.event.data.used)).toEqual([5, 5]);
    expect(hook.delivered[0]!.event.data.application).toBe(mobileId);
    expect(hook.delivered[1]!.event.data.application).not.toBe(mobileId);
  });

  it('answers the request that crosses a threshold while its webhook hangs', async () => {
    const hook = await receiver();
    hook.answer = 'hang';
    const gateway = await suite.gatewayWith({ ...tenAMinute(), ...notifying(hook.url, [10]) });
    const crossing = await get(gateway, mobileKey);
    expect(crossing.status).toBe(200);
    await expect.poll(() => hook.attempts.length).toBe(1);
    // The receiver still holds the POST: requests go on being answered meanwhile.
    expect((await get(gateway, mobileKey)).status).toBe(200);
    expect(hook.delivered).toHaveLength(0);
  });

  it('delivers the event to a receiver that refused connections, then answered 500, once it is back', async () => {
    const hook = await receiver();
    await hook.stop();
    const timers = new FakeTimers();
    const gateway = await startTestGateway(
      petsConfig(suite.upstream().url, {
        applications: [{ id: mobileId, name: 'Mobile', apikey_development: mobileKey }],
        ...tenAMinute(),
        ...notifying(hook.url, [80]),
      }),
      {},
      { clock: () => suite.clock.now, timers },
    );
    try {
      for (let call = 0; call < 8; call += 1) expect((await get(gateway, mobileKey)).status).toBe(200);
      await expect.poll(() => sentOf(gateway, 'retried')).toBe(1);
      await hook.open();
      hook.answer = 500;
      // The first retry waits 10 s and up to a tenth more.
      timers.advance(11_000);
      await expect.poll(() => sentOf(gateway, 'retried')).toBe(2);
      expect(hook.attempts).toHaveLength(1);
      hook.answer = 200;
      timers.advance(22_000);
      await expect.poll(() => hook.delivered.length).toBe(1);
      expect(hook.delivered[0]!.signed).toBe(true);
      expect(hook.delivered[0]!.event.data).toMatchObject({ threshold: 80, used: 8 });
      expect(await sentOf(gateway, 'delivered')).toBe(1);
    } finally {
      await gateway.close();
    }
  });

  it('sends to the webhooks a reload gives, from the next threshold on', async () => {
    const hook = await receiver();
    const applications = [{ id: mobileId, name: 'Mobile', apikey_development: mobileKey }];
    const gateway = await suite.gatewayWith({ applications, ...tenAMinute() });
    for (let call = 0; call < 8; call += 1) await get(gateway, mobileKey);
    const reloaded = await gateway.reloadWith(
      petsConfig(suite.upstream().url, { applications, ...tenAMinute(), ...notifying(hook.url) }),
    );
    expect(reloaded).toMatchObject({ applied: true });
    for (let call = 0; call < 2; call += 1) await get(gateway, mobileKey);
    await expect.poll(() => hook.delivered.length).toBe(2);
    // 80% was reached before the reload, without a webhook: the next decision, at 90%, tells it.
    expect(hook.delivered.map((received) => received.event.data.used)).toEqual([9, 10]);
  });

  it('sends one event per threshold from a fleet of two gateways on one Redis', async () => {
    const hook = await receiver();
    const clock = { now: 1_800_000_000_000 };
    const clocks = { clock: () => clock.now };
    const cleanups: Array<() => Promise<void> | void> = [];
    try {
      const [a, b] = await startFleetOfTwo(
        (cleanup) => cleanups.push(cleanup),
        {
          ...tenAMinute(),
          ...notifying(hook.url),
        },
        { clocks: [clocks, clocks] },
      );
      const statuses: number[] = [];
      for (let call = 0; call < 12; call += 1)
        statuses.push((await get(call % 2 === 0 ? a : b, mobileKey)).status);
      expect(statuses.filter((status) => status === 200)).toHaveLength(10);
      await expect.poll(() => hook.delivered.length).toBe(2);
      expect(thresholdsOf(hook).sort()).toEqual([100, 80]);
      expect(hook.delivered.every((received) => received.signed)).toBe(true);

      clock.now += minute + 1_000;
      for (let call = 0; call < 12; call += 1) await get(call % 2 === 0 ? b : a, mobileKey);
      await expect.poll(() => hook.delivered.length).toBe(4);
      expect(hook.attempts).toHaveLength(4);
    } finally {
      for (const cleanup of cleanups.reverse()) await cleanup();
    }
  });
});
