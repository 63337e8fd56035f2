import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get, mobileId, mobileKey } from '../helpers/enforcement-gateways.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { sumOf } from '../helpers/gateway-metrics.js';
import { startRedis, type RedisService } from '../helpers/redis-server.js';
import {
  applicationDefaultQuotaId,
  petsConfig,
  startTestGateway,
  throttle,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import { historyNoon } from '../helpers/usage-history.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * What the usage history and the threshold alerts cost Redis, counted by Redis itself (a server of this
 * file's own, so that no other test's commands are in its statistics): the same requests make the same
 * counter trips with both on as with both off; the history's lines go in one pipeline at the flush, and
 * an alert's claim is one SET per threshold crossed, never one per request.
 */
const defer = cleanupAfterEach();
const secret = 'trips-secret-0123456789abcdef';
const requests = 200;

let redis: RedisService;
let client: Redis;
beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
});
afterAll(async () => {
  await client.quit();
  await redis.stop();
});

/** Calls of each command since the last reset of the statistics, but the test's own INFO and CONFIG. */
async function commandCalls(): Promise<Record<string, number>> {
  const calls: Record<string, number> = {};
  for (const line of (await client.info('commandstats')).split('\r\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (match && match[1] !== 'info' && !match[1]!.startsWith('config')) calls[match[1]!] = Number(match[2]);
  }
  return calls;
}

/** The commands `requests` admitted calls of Mobile make, then those of the flush at the end of their second. */
async function commandsOf(overrides: Record<string, unknown>, prefix: string) {
  const clock = new FakeClock(historyNoon);
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const config = petsConfig(`${upstream.url}/pets`, {
    applications: [{ id: mobileId, name: 'Mobile', apikey_development: mobileKey }],
    store: { type: 'redis', url: redis.url, prefix },
    quotas: [
      {
        id: applicationDefaultQuotaId,
        type: 'APPLICATION',
        name: 'Application Default',
        restrictions: [throttle(requests, 1, 'hour')],
      },
    ],
    ...overrides,
  });
  const gateway = await startTestGateway(config, {}, { clock: clock.now, timers: clock });
  defer(() => gateway.close());
  await client.config('RESETSTAT');
  // 4 ms apart: a rate the leases can measure, and all of them within the history's first second.
  for (let call = 0; call < requests; call += 1) {
    expect((await get(gateway, mobileKey)).status).toBe(200);
    await clock.advance(4);
  }
  const during = await commandCalls();
  const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  await client.config('RESETSTAT');
  await clock.advance(1_000 - requests * 4);
  return { during, trips: sumOf(metrics, 'quotagate_store_trips_total'), flush: await commandCalls() };
}

describe('the Redis commands of the usage history and the threshold alerts', () => {
  it('are no more counter trips, one pipeline a second, and one claim per threshold crossed', async () => {
    const hook = await startWebhookReceiver(secret);
    defer(() => hook.close());
    const off = await commandsOf({ usageHistory: { enabled: false } }, 'trips-off:');
    const on = await commandsOf(
      { notifications: { webhooks: [{ url: hook.url, secret, thresholds: [50, 100] }] } },
      'trips-on:',
    );

    // The counter trips (leases make them far fewer than the requests) are the same with both on.
    expect(on.trips).toBe(off.trips);
    expect(off.trips).toBeGreaterThan(0);
    expect(off.trips).toBeLessThan(requests / 2);
    // During the requests: an alert's claim (SET NX) per threshold crossed, and no history write (its
    // pipeline is the only EXPIRE; the counters' scripts use PEXPIRE).
    expect([on.during['set'], on.during['expire']]).toEqual([2, undefined]);
    expect([off.during['set'], off.during['expire']]).toEqual([undefined, undefined]);
    // The flush, a second after the first request: the day's line of Mobile × pets × getPet (its two
    // counts that are not zero, admitted and bytes out) and the day's expiry, in one pipeline.
    const written = ({ hincrby, expire }: Record<string, number>) => ({ hincrby, expire });
    expect(written(on.flush)).toEqual({ hincrby: 2, expire: 1 });
    expect(written(off.flush)).toEqual({ hincrby: undefined, expire: undefined });
    await expect
      .poll(() => hook.delivered.map((received) => received.event.data.threshold))
      .toEqual([50, 100]);
  });
});
