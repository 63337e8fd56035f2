import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get } from '../helpers/enforcement-gateways.js';
import { startHoldingUpstream, type HoldingUpstream } from '../helpers/holding-upstream.js';
import type { RawResponse } from '../helpers/raw-http.js';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';
import {
  concurrency,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';

/**
 * A `concurrency` count on Redis through an outage (issue 42, point 8): the slots a gateway took alone
 * while Redis was frozen are written to Redis when it answers again, and the slots it freed meanwhile
 * free only its own, so the fleet counts every request open, never one too few.
 */
const executable = await redisServerPath();
const defer = cleanupAfterEach();

interface Fleet {
  redis: RedisProcess;
  upstream: HoldingUpstream;
  a: TestGateway;
  b: TestGateway;
  /** The answers of the requests opened so far, in the order they were opened. */
  answers: Array<Promise<RawResponse>>;
}

/** Two gateways on a redis-server of the test's own, over one upstream that holds every answer. */
async function fleetOfTwo(connections: number): Promise<Fleet> {
  const upstream = await startHoldingUpstream();
  defer(() => upstream.close());
  const redis = await startRedisProcess(executable!);
  defer(() => redis.stop());
  const config = petsConfig(upstream.url, { store: { type: 'redis', url: redis.url, prefix: 'slots:' } });
  const a = await startTestGateway(config);
  defer(() => a.close());
  const b = await startTestGateway(config);
  defer(() => b.close());
  // A test that fails while Redis is frozen still closes its gateways.
  defer(() => redis.resume());
  await setQuota(a, { type: 'API', name: 'System', restrictions: [concurrency(connections)] }, systemQuotaId);
  await expect.poll(async () => (await quotaUsage(b.adminUrl, systemQuotaId)).restrictions.length).toBe(1);
  return { redis, upstream, a, b, answers: [] };
}

/** Opens one request through `gateway` and waits until the upstream holds it. */
async function open(fleet: Fleet, gateway: TestGateway): Promise<void> {
  const before = fleet.upstream.held();
  fleet.answers.push(get(gateway));
  await expect.poll(() => fleet.upstream.held(), { timeout: 5_000 }).toBe(before + 1);
}

const metricsOf = async (gateway: TestGateway) => (await fetch(`${gateway.adminUrl}/metrics`)).text();

/** The requests in flight the fleet counts, as the admin API reads them from Redis. */
const usedOf = async (gateway: TestGateway) =>
  (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]!.used;

/**
 * Waits until `gateway` has handed its decisions to store.onError, wakes Redis, and waits until the
 * shared counters decide again.
 */
async function outageThenBack(gateway: TestGateway, redis: RedisProcess): Promise<void> {
  await expect.poll(() => metricsOf(gateway), { timeout: 10_000 }).toMatch(/^quotagate_store_shared 0$/m);
  redis.resume();
  await expect.poll(() => metricsOf(gateway), { timeout: 10_000 }).toMatch(/^quotagate_store_shared 1$/m);
}

describe.runIf(executable)('a concurrency count on Redis through an outage (a fleet of 2)', () => {
  it('counts the slots a gateway took alone while Redis was frozen as soon as it decides with Redis again', async () => {
    const fleet = await fleetOfTwo(6);
    const { redis, upstream, a, b } = fleet;
    for (const gateway of [a, a, b, b]) await open(fleet, gateway);
    expect(await usedOf(a)).toBe(4);

    redis.pause();
    // Decided by a's own counters (its share of 6 is 3, and it holds 2): a slot Redis cannot see yet.
    await open(fleet, a);
    await outageThenBack(a, redis);
    expect(await usedOf(a)).toBe(5);
    expect(await usedOf(b)).toBe(5);

    // The sixth slot is the last one, wherever it is asked for.
    await open(fleet, b);
    expect((await get(a)).status).toBe(429);
    expect((await get(b)).status).toBe(429);
    expect(await usedOf(a)).toBe(6);

    upstream.answerAll();
    for (const answer of fleet.answers) expect((await answer).status).toBe(200);
    await expect.poll(() => usedOf(b), { timeout: 5_000 }).toBe(0);
  }, 40_000);

  it("frees, for the slots freed while Redis was frozen, only the freeing gateway's own, and counts those it took instead", async () => {
    const fleet = await fleetOfTwo(6);
    const { redis, upstream, a, b, answers } = fleet;
    // The upstream answers the oldest first: a's two, then b's.
    for (const gateway of [a, a, b, b]) await open(fleet, gateway);
    expect(await usedOf(b)).toBe(4);

    redis.pause();
    // a's connections rotate while Redis is frozen: each one that ends is followed by a new one.
    upstream.answerOne();
    expect((await answers[0]!).status).toBe(200);
    await open(fleet, a);
    upstream.answerOne();
    expect((await answers[1]!).status).toBe(200);
    await open(fleet, a);
    expect(upstream.held()).toBe(4);

    await outageThenBack(a, redis);
    expect(await usedOf(a)).toBe(4);
    await open(fleet, b);
    await open(fleet, a);
    expect((await get(b)).status).toBe(429);
    expect(await usedOf(b)).toBe(6);

    upstream.answerAll();
    for (const answer of answers.slice(2)) expect((await answer).status).toBe(200);
    await expect.poll(() => usedOf(a), { timeout: 5_000 }).toBe(0);
  }, 40_000);
});
