import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get, mobileId, mobileKey, putOnPlan } from '../helpers/enforcement-gateways.js';
import { redisServerPath, startRedisProcess } from '../helpers/redis-process.js';
import { mb, petsConfig, setQuota, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * `onError: local` starts this gateway's own counters from the totals it last saw in Redis. Those totals
 * must leave the window as the units they stand for do: a Redis frozen after a byte counter's window has
 * passed must not bring its old total back for a whole window.
 */
const executable = await redisServerPath();
const download = Buffer.alloc(300 * 1024, 'x');

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': download.length });
    res.end(download);
  });
});
afterAll(() => upstream.close());

const defer = cleanupAfterEach();

/**
 * A gateway on a Redis of the test's own, with the mobile application on a plan of 0.5 MB a minute,
 * which two downloads of 300 KB have filled (the second cut as its bytes passed the limit): the next
 * download is refused.
 */
async function overItsBytes(clock: { now: number }) {
  const redis = await startRedisProcess(executable!);
  defer(() => redis.stop());
  const gateway: TestGateway = await startTestGateway(
    petsConfig(upstream.url, {
      store: { type: 'redis', url: redis.url, prefix: 'seeds:', onError: 'local', commandTimeout: 50 },
      applications: [{ id: mobileId, name: 'Mobile', apikey_development: mobileKey }],
    }),
    {},
    { clock: () => clock.now },
  );
  defer(() => gateway.close());
  // Awake again before the gateway closes, which then hands its units back at once.
  defer(() => redis.resume());
  const plan = await setQuota(gateway, {
    type: 'APPLICATION',
    name: 'Half a megabyte',
    restrictions: [mb(0.5, 1, 'minute')],
  });
  await putOnPlan(gateway, mobileId, plan);
  // The second download passes the limit: it is cut as its bytes do, and charged all of them.
  expect((await get(gateway, mobileKey)).status).toBe(200);
  await expect(get(gateway, mobileKey)).rejects.toThrow('aborted');
  expect((await get(gateway, mobileKey)).status).toBe(429);
  return { redis, gateway };
}

describe.runIf(executable)('the counters of onError: local, started from what Redis last said', () => {
  it('forget a byte total whose window has passed: a Redis frozen 90 s after the limit was reached refuses nothing', async () => {
    const clock = { now: 1_800_000_000_000 };
    const { redis, gateway } = await overItsBytes(clock);
    clock.now += 90_000;
    redis.pause();
    const answer = await get(gateway, mobileKey);
    expect(answer.status).toBe(200);
    expect(answer.headers['retry-after']).toBeUndefined();
  });

  it('hold a byte total seen within its window only for what is left of it', async () => {
    const clock = { now: 1_800_000_000_000 };
    const { redis, gateway } = await overItsBytes(clock);
    clock.now += 30_000;
    redis.pause();
    const refused = await get(gateway, mobileKey);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(30);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(31);
    // The units leave a minute (and a sub-bucket) after they were counted, not a minute after the outage.
    clock.now += 31_000;
    expect((await get(gateway, mobileKey)).status).toBe(200);
  });
});
