import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  setQuota,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const systemId = '00000000-0000-0000-0000-000000000000';
const executable = await redisServerPath();

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(() => upstream.close());

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function fixture(
  onError: string,
  limit: number,
): Promise<{ redis: RedisProcess; gateway: TestGateway; admin: Redis }> {
  const redis = await startRedisProcess(executable!);
  cleanups.push(() => redis.stop());
  const gateway = await startTestGateway(
    petsConfig(upstream.url, { store: { type: 'redis', url: redis.url, onError, prefix: 'faults:' } }),
  );
  cleanups.push(() => gateway.close());
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
  cleanups.push(async () => admin.disconnect());
  return { redis, gateway, admin };
}

/** Sends a request and measures how long the gateway took to decide it. */
async function timed(gateway: TestGateway): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const res = await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(devKey) } });
  return { status: res.status, ms: performance.now() - started };
}

async function sharedCount(admin: Redis): Promise<number> {
  const [key] = await admin.keys('faults:{counters}:*');
  return key ? Number(await admin.hget(key, 't')) : 0;
}

const sharedAgain = (gateway: TestGateway) =>
  expect
    .poll(
      async () =>
        /^quotagate_counter_store_shared 1$/m.test(await (await fetch(`${gateway.adminUrl}/metrics`)).text()),
      {
        timeout: 5_000,
        interval: 50,
      },
    )
    .toBe(true);

/** Waits until the gateway has handed the decisions to `policy` (a PING confirmed that Redis is away). */
const switched = (gateway: TestGateway, policy: string) =>
  expect
    .poll(
      async () =>
        (await (await fetch(`${gateway.adminUrl}/metrics`)).text()).includes(
          `quotagate_counter_store_switches_total{to="${policy}"} 1`,
        ),
      {
        timeout: 2_000,
        interval: 25,
      },
    )
    .toBe(true);

describe.runIf(executable)('Redis faults', () => {
  it('local: decides every request within 100 ms while Redis is paused or dead, then the shared counters resume', async () => {
    const { redis, gateway, admin } = await fixture('local', 100);
    for (let i = 0; i < 2; i += 1) expect((await timed(gateway)).status).toBe(200);
    expect(await sharedCount(admin)).toBe(2);

    redis.pause();
    let sentWhilePaused = 0;
    for (let i = 0; i < 5; i += 1) {
      const { status, ms } = await timed(gateway);
      expect(status).toBe(200);
      expect(ms).toBeLessThan(100);
      // Until a PING confirms that Redis is gone, each request tries it and waits out the 50 ms deadline.
      if (ms >= 50) sentWhilePaused += 1;
    }
    expect(sentWhilePaused).toBeGreaterThanOrEqual(1);
    await switched(gateway, 'local');
    redis.resume();
    await sharedAgain(gateway);
    for (let i = 0; i < 3; i += 1) expect((await timed(gateway)).status).toBe(200);
    // 2 before the pause, 3 after it, and the scripts that were on their way while Redis was frozen: they
    // missed their deadline (and were decided locally) but Redis ran them when it woke. Such a request
    // counts twice, never zero times.
    expect(await sharedCount(admin)).toBe(5 + sentWhilePaused);

    await redis.kill();
    for (let i = 0; i < 3; i += 1) {
      const { status, ms } = await timed(gateway);
      expect(status).toBe(200);
      expect(ms).toBeLessThan(100);
    }
    // A restarted Redis has its data (append-only file) but no scripts: they must be loaded again.
    await redis.restart();
    await sharedAgain(gateway);
    for (let i = 0; i < 2; i += 1) expect((await timed(gateway)).status).toBe(200);
    const fresh = new Redis(redis.url);
    fresh.on('error', () => undefined);
    cleanups.push(async () => fresh.disconnect());
    expect(await sharedCount(fresh)).toBe(7 + sentWhilePaused);
    expect(
      gateway.logs.filter((line) => String(line.msg).startsWith('shared counter store unreachable')),
    ).toHaveLength(2);
  });

  it('local: enforces the limits alone while Redis is away', async () => {
    const { redis, gateway } = await fixture('local', 3);
    redis.pause();
    const statuses = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await timed(gateway)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
  });

  it('deny: answers 503 within 100 ms while Redis is paused, and serves again once it is back', async () => {
    const { redis, gateway } = await fixture('deny', 100);
    expect((await timed(gateway)).status).toBe(200);
    redis.pause();
    for (let i = 0; i < 3; i += 1) {
      const { status, ms } = await timed(gateway);
      expect(status).toBe(503);
      expect(ms).toBeLessThan(100);
    }
    redis.resume();
    await sharedAgain(gateway);
    expect((await timed(gateway)).status).toBe(200);
  });

  it('allow: admits every request while Redis is away, even over the limit', async () => {
    const { redis, gateway } = await fixture('allow', 1);
    expect((await timed(gateway)).status).toBe(200);
    expect((await timed(gateway)).status).toBe(429);
    redis.pause();
    for (let i = 0; i < 3; i += 1) expect((await timed(gateway)).status).toBe(200);
    await switched(gateway, 'allow');
    expect((await timed(gateway)).status).toBe(200);
    redis.resume();
  });
});
