import http from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';
import {
  adminUser,
  basicAuth,
  devKey,
  mb,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * A fleet of three gateways on one private Redis, at the edges where a fleet used to admit more than
 * one process: measured bytes across gateways, and a Redis that freezes or dies under `onError: local`.
 * Admissions are counted at the upstream, where they matter.
 */
const executable = await redisServerPath();
const download = Buffer.alloc(300 * 1024, 'x');

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream((req, res) => {
    if (req.url?.startsWith('/download')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': download.length });
      res.end(download);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  });
});
afterAll(() => upstream.close());

const defer = cleanupAfterEach();

async function startFleet(redis: RedisProcess, prefix: string): Promise<TestGateway[]> {
  const gateways: TestGateway[] = [];
  for (let i = 0; i < 3; i += 1) {
    const gateway = await startTestGateway(
      petsConfig(`${upstream.url}`, {
        store: { type: 'redis', url: redis.url, prefix, onError: 'local', commandTimeout: 50 },
      }),
    );
    defer(() => gateway.close());
    gateways.push(gateway);
  }
  // Every gateway must see the others' heartbeats: shares are limit ÷ live gateways.
  for (const gateway of gateways) {
    await expect
      .poll(
        async () =>
          (await (await fetch(`${gateway.adminUrl}/metrics`)).text()).match(
            /^quotagate_store_live_gateways (\d+)$/m,
          )?.[1],
        {
          timeout: 5_000,
          interval: 50,
        },
      )
      .toBe('3');
  }
  return gateways;
}

/** Sets the System quota through the first gateway and waits until all three enforce it. */
async function setSystemQuota(gateways: TestGateway[], restrictions: unknown[]): Promise<void> {
  await setQuota(gateways[0]!, { type: 'API', name: 'System', restrictions }, systemQuotaId);
  for (const gateway of gateways) {
    await expect
      .poll(
        async () => {
          const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas/${systemQuotaId}`, {
            headers: { authorization: userAuth(adminUser) },
          });
          return ((await res.json()) as { restrictions: unknown[] }).restrictions.length;
        },
        { timeout: 2_000, interval: 20 },
      )
      .toBe(restrictions.length);
  }
}

/** One GET through `gateway`; its status once the whole response has been read, or `cut`. */
function get(gateway: TestGateway, path: string): Promise<number | 'cut'> {
  return new Promise((resolve, reject) => {
    http
      .get(`${gateway.url}${path}`, { headers: { authorization: basicAuth(devKey) } }, (res) => {
        res.resume();
        res.on('error', () => undefined);
        res.once('close', () => resolve(res.complete ? (res.statusCode ?? 0) : 'cut'));
      })
      .on('error', reject);
  });
}

const arrivals = (from: number, path: string) =>
  upstream.requests.slice(from).filter((seen) => seen.url.startsWith(path)).length;

describe.runIf(executable)('a fleet of 3 gateways at the edges', () => {
  it('throttlemb: 1 MB a minute, 300 KB downloads rotated over the fleet → the one that passes 1 MB is cut as it does', async () => {
    const redis = await startRedisProcess(executable!);
    defer(() => redis.stop());
    const gateways = await startFleet(redis, 'bytes:');
    await setSystemQuota(gateways, [mb(1, 1, 'minute')]);
    const before = upstream.requests.length;
    const statuses: Array<number | 'cut'> = [];
    for (let i = 0; i < 6; i += 1) statuses.push(await get(gateways[i % 3]!, `/pets/download-${i}`));
    // 3 downloads (900 KB) leave room for a 4th to start, which is cut as its bytes pass 1 MB: the 5th
    // and 6th must be refused, whichever gateway they reach, because the bytes of each exchange are
    // counted as they pass, or at once when it ends.
    expect(statuses).toEqual([200, 200, 200, 'cut', 429, 429]);
    expect(arrivals(before, '/download')).toBe(4);
  });

  it('leases: a gateway spends them without a trip, and gives back what it did not spend when it stops', async () => {
    const redis = await startRedisProcess(executable!);
    defer(() => redis.stop());
    const prefix = 'leases:';
    // The counters' clock moves 1 ms a request from the start of a 600 ms sub-bucket: no lease runs out
    // while the test looks, however slowly a loaded machine runs it.
    const clock = { now: Math.ceil(Date.now() / 600) * 600 + 1 };
    const gateway = await startTestGateway(
      petsConfig(upstream.url, { store: { type: 'redis', url: redis.url, prefix } }),
      {},
      { clock: () => clock.now },
    );
    let closed = false;
    defer(async () => {
      if (!closed) await gateway.close();
    });
    await setQuota(
      gateway,
      {
        type: 'API',
        name: 'System',
        restrictions: [throttle(1_000_000, 1, 'minute'), mb(10_000, 1, 'minute')],
      },
      systemQuotaId,
    );
    for (let i = 0; i < 200; i += 1) {
      clock.now += 1;
      expect(await get(gateway, `/pets/${i}`)).toBe(200);
    }
    for (let i = 0; i < 10; i += 1) {
      clock.now += 1;
      expect(await get(gateway, `/pets/download-${i}`)).toBe(200);
    }
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    const trips = Number(metrics.match(/^quotagate_store_trips_total (\d+)$/m)?.[1]);
    expect(trips).toBeLessThan(105);
    const admin = new Redis(redis.url);
    defer(async () => admin.disconnect());
    // The message counter and the byte counter, both restrictions on every API, smaller first.
    const totals = async () => {
      const keys = await admin.keys(`${prefix}*:{all}`);
      expect(keys).toHaveLength(2);
      const counted = await Promise.all(keys.map(async (key) => Number(await admin.hget(key, 't'))));
      return counted.sort((a, b) => a - b);
    };
    const moved = 200 * Buffer.byteLength('ok') + 10 * download.length;
    const [messagesHeld] = await totals();
    expect(messagesHeld).toBeGreaterThan(210);
    closed = true;
    await gateway.close();
    // What is left once the leases are back: exactly what was admitted and moved.
    expect(await totals()).toEqual([210, moved]);
  });

  for (const fault of ['frozen', 'killed'] as const) {
    it(`local: a ${fault} Redis lets the fleet admit at most the limit + one share, counted at the upstream`, async () => {
      const redis = await startRedisProcess(executable!);
      defer(() => redis.stop());
      const gateways = await startFleet(redis, `${fault}:`);
      // 60 an hour: every request of the test falls in one window.
      await setSystemQuota(gateways, [throttle(60, 1, 'hour')]);
      const before = upstream.requests.length;
      for (let i = 0; i < 30; i += 1) expect(await get(gateways[i % 3]!, `/pets/${i}`)).toBe(200);
      if (fault === 'frozen') redis.pause();
      else await redis.kill();
      // Each gateway, alone, is asked for 60 more: all of them together would be 180.
      await Promise.all(
        gateways.map(async (gateway) => {
          for (let i = 0; i < 60; i += 1) await get(gateway, `/pets/${i}`);
        }),
      );
      const admitted = arrivals(before, '/');
      // Each gateway's own counters start from its share (20) of the 30 it knew of: 10 more each.
      expect(admitted).toBeGreaterThanOrEqual(30);
      expect(admitted).toBeLessThanOrEqual(60 + 20);
      if (fault === 'frozen') redis.resume();
    });
  }
});
