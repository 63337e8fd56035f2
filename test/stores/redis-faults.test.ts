import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';
import {
  basicAuth,
  devKey,
  mb,
  petsConfig,
  setQuota,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { post } from '../helpers/enforcement-gateways.js';

const systemId = '00000000-0000-0000-0000-000000000000';
const executable = await redisServerPath();

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(() => upstream.close());

const defer = cleanupAfterEach();

async function fixture(
  onError: string,
  limit: number,
): Promise<{ redis: RedisProcess; gateway: TestGateway; admin: Redis }> {
  const redis = await startRedisProcess(executable!);
  defer(() => redis.stop());
  const gateway = await startTestGateway(
    petsConfig(upstream.url, { store: { type: 'redis', url: redis.url, onError, prefix: 'faults:' } }),
  );
  defer(() => gateway.close());
  await setQuota(
    gateway,
    {
      type: 'API',
      name: 'System',
      restrictions: [
        { api: '*', method: '*', type: 'throttle', config: { messages: limit, per: 1, period: 'hour' } },
      ],
    },
    systemId,
  );
  const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  admin.on('error', () => undefined);
  defer(async () => admin.disconnect());
  return { redis, gateway, admin };
}

/** Sends a request and measures how long the gateway took to decide it. */
async function timed(gateway: TestGateway): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const res = await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(devKey) } });
  return { status: res.status, ms: performance.now() - started };
}

async function sharedCount(admin: Redis): Promise<number> {
  const [key] = await admin.keys('faults:*:{all}');
  return key ? Number(await admin.hget(key, 't')) : 0;
}

/** The caller's own usage, as the usage path answers it: the status and the used units of each restriction. */
async function usage(gateway: TestGateway): Promise<{ status: number; used: number[] }> {
  const res = await request(gateway.url, {
    path: '/_quotagate/usage',
    headers: { authorization: basicAuth(devKey) },
  });
  const body =
    res.status === 200 ? (JSON.parse(res.body) as { restrictions: Array<{ used: number }> }) : null;
  return { status: res.status, used: body?.restrictions.map((reading) => reading.used) ?? [] };
}

const metricsOf = async (gateway: TestGateway) => (await fetch(`${gateway.adminUrl}/metrics`)).text();

/** Script calls the gateway made to Redis so far. */
const tripsOf = (metrics: string) => Number(/^quotagate_store_trips_total (\d+)$/m.exec(metrics)?.[1]);

const sharedAgain = (gateway: TestGateway) =>
  expect
    .poll(async () => /^quotagate_store_shared 1$/m.test(await metricsOf(gateway)), {
      timeout: 5_000,
      interval: 50,
    })
    .toBe(true);

/**
 * Waits until the gateway has handed the decisions to `policy` for the `times`th time: failures in a row
 * over a second (failed calls, unanswered PINGs) confirmed that Redis is away.
 */
const switched = (gateway: TestGateway, policy: string, times = 1) =>
  expect
    .poll(
      async () =>
        (await metricsOf(gateway)).includes(`quotagate_store_switches_total{to="${policy}"} ${times}`),
      {
        timeout: 5_000,
        interval: 25,
      },
    )
    .toBe(true);

describe.runIf(executable)('Redis faults', () => {
  it('local: waits for a frozen Redis until a PING goes unanswered, decides every request without asking Redis once the outage is confirmed, and the shared counters learn what was admitted alone', async () => {
    // Under 100 per window no lease is taken, so every count below is exact.
    const { redis, gateway, admin } = await fixture('local', 99);
    for (let i = 0; i < 2; i += 1) expect((await timed(gateway)).status).toBe(200);
    expect(await sharedCount(admin)).toBe(2);

    redis.pause();
    // A slow answer is not an outage: the first request waits for its decision until the PING (four
    // times the 50 ms deadline, at least 200 ms) fails, and only then is decided by this gateway.
    const first = await timed(gateway);
    expect(first.status).toBe(200);
    expect(first.ms).toBeGreaterThanOrEqual(200);
    expect(first.ms).toBeLessThan(1_000);
    await switched(gateway, 'local');
    const tripsBefore = tripsOf(await metricsOf(gateway));
    for (let i = 0; i < 4; i += 1) expect((await timed(gateway)).status).toBe(200);
    expect(tripsOf(await metricsOf(gateway))).toBe(tripsBefore);
    redis.resume();
    await sharedAgain(gateway);
    // 2 before the pause; the 5 admitted alone, added when Redis answered again; and the first one's
    // script, which Redis ran when it woke: a request may count twice, never zero times.
    expect(await sharedCount(admin)).toBe(2 + 5 + 1);
    for (let i = 0; i < 3; i += 1) expect((await timed(gateway)).status).toBe(200);
    expect(await sharedCount(admin)).toBe(11);

    // A dead Redis closes the connection: the policy decides at once, without a PING, and the failures
    // of the probe confirm the outage a second after the first.
    await redis.kill();
    for (let i = 0; i < 3; i += 1) {
      const { status, ms } = await timed(gateway);
      expect(status).toBe(200);
      expect(ms).toBeLessThan(100);
    }
    await switched(gateway, 'local', 2);
    // A restarted Redis has its data (append-only file) but no scripts: they must be loaded again.
    await redis.restart();
    await sharedAgain(gateway);
    for (let i = 0; i < 2; i += 1) expect((await timed(gateway)).status).toBe(200);
    const fresh = new Redis(redis.url);
    fresh.on('error', () => undefined);
    defer(async () => fresh.disconnect());
    expect(await sharedCount(fresh)).toBe(11 + 3 + 2);
    expect(
      gateway.logs.filter((line) => String(line.msg).startsWith('shared counter store unreachable')),
    ).toHaveLength(2);
  });

  it('local: one late answer does not switch the counting mode: a Redis frozen for one request and woken decides the next', async () => {
    const { redis, gateway, admin } = await fixture('local', 99);
    expect((await timed(gateway)).status).toBe(200);
    redis.pause();
    // Decided alone once its PING went unanswered: one failure, not an outage.
    expect((await timed(gateway)).status).toBe(200);
    redis.resume();
    await expect
      .poll(() => gateway.logs.map((line) => line.msg))
      .toContain('the shared counter store answers again; no outage was confirmed');
    const metrics = await metricsOf(gateway);
    expect(metrics).toMatch(/^quotagate_store_shared 1$/m);
    expect(metrics).not.toContain('quotagate_store_switches_total{');
    for (let i = 0; i < 2; i += 1) expect((await timed(gateway)).status).toBe(200);
    // 1 before; the late request twice (its script ran when Redis woke, and its unit admitted alone was
    // handed over: never zero times); 2 after, decided by Redis.
    expect(await sharedCount(admin)).toBe(1 + 2 + 2);
  });

  it('local: enforces the limits alone while Redis is away', async () => {
    const { redis, gateway } = await fixture('local', 3);
    redis.pause();
    const statuses = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await timed(gateway)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
  });

  it('deny: answers 503 once a PING goes unanswered, without asking Redis once the outage is confirmed, and serves again once it is back', async () => {
    const { redis, gateway } = await fixture('deny', 100);
    expect((await timed(gateway)).status).toBe(200);
    redis.pause();
    const first = await timed(gateway);
    expect(first.status).toBe(503);
    expect(first.ms).toBeLessThan(1_000);
    await switched(gateway, 'deny');
    const tripsBefore = tripsOf(await metricsOf(gateway));
    for (let i = 0; i < 3; i += 1) expect((await timed(gateway)).status).toBe(503);
    expect(tripsOf(await metricsOf(gateway))).toBe(tripsBefore);
    redis.resume();
    await sharedAgain(gateway);
    expect((await timed(gateway)).status).toBe(200);
  });

  it('allow: admits every request while Redis is away, even over the limit', async () => {
    const { redis, gateway } = await fixture('allow', 2);
    expect((await timed(gateway)).status).toBe(200);
    redis.pause();
    for (let i = 0; i < 3; i += 1) expect((await timed(gateway)).status).toBe(200);
    await switched(gateway, 'allow');
    expect((await timed(gateway)).status).toBe(200);
    redis.resume();
  });

  it.each(['deny', 'allow'])(
    '%s: the usage path answers 503 while Redis is dead, as it has no counters to read, and reads them again once it is back',
    async (onError) => {
      const { redis, gateway } = await fixture(onError, 100);
      expect((await timed(gateway)).status).toBe(200);
      expect(await usage(gateway)).toEqual({ status: 200, used: [1] });
      await redis.kill();
      // Before and after a request has handed the decisions to the policy.
      expect((await usage(gateway)).status).toBe(503);
      expect((await timed(gateway)).status).toBe(onError === 'deny' ? 503 : 200);
      await switched(gateway, onError);
      expect((await usage(gateway)).status).toBe(503);
      await redis.restart();
      await sharedAgain(gateway);
      expect(await usage(gateway)).toEqual({ status: 200, used: [1] });
    },
  );

  it("local: the usage path reads this gateway's own counters while Redis is dead, as they decide", async () => {
    const { redis, gateway } = await fixture('local', 3);
    for (let i = 0; i < 2; i += 1) expect((await timed(gateway)).status).toBe(200);
    await redis.kill();
    expect((await timed(gateway)).status).toBe(200);
    // The 2 the fleet had counted seed this gateway's counter, and it admitted 1 more alone.
    expect(await usage(gateway)).toEqual({ status: 200, used: [3] });
    expect((await timed(gateway)).status).toBe(429);
  });

  it('deny: a body larger than a byte window is still 413 naming the limit while Redis is dead, without RateLimit fields it cannot read', async () => {
    const { redis, gateway } = await fixture('deny', 100);
    await setQuota(gateway, { type: 'API', name: 'System', restrictions: [mb(0.001, 1, 'hour')] }, systemId);
    await redis.kill();
    const res = await post(gateway, 2000);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body).message).toBe(
      `Payload Too Large: a body of 2000 bytes is more than restriction ${systemId}/0 allows in any 3600 seconds (1048 bytes)`,
    );
    expect(res.headers.ratelimit).toBeUndefined();
  });
});
