import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get } from '../helpers/enforcement-gateways.js';
import { startHoldingUpstream, type HoldingUpstream } from '../helpers/holding-upstream.js';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';
import {
  concurrency,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';

/** A concurrency restriction while Redis is dead: `store.onError` decides, as for the other types. */
const executable = await redisServerPath();
const defer = cleanupAfterEach();

async function fixture(
  onError: string,
): Promise<{ redis: RedisProcess; gateway: TestGateway; upstream: HoldingUpstream }> {
  const upstream = await startHoldingUpstream();
  defer(() => upstream.close());
  const redis = await startRedisProcess(executable!);
  defer(() => redis.stop());
  const gateway = await startTestGateway(
    petsConfig(upstream.url, { store: { type: 'redis', url: redis.url, onError, prefix: 'faults:' } }),
  );
  defer(() => gateway.close());
  await setQuota(gateway, { type: 'API', name: 'System', restrictions: [concurrency(1)] }, systemQuotaId);
  return { redis, gateway, upstream };
}

describe.runIf(executable)('a concurrency restriction while Redis is dead', () => {
  it('local: this gateway holds the slots in its own counters, and frees them as requests end', async () => {
    const { redis, gateway, upstream } = await fixture('local');
    await redis.kill();
    const held = get(gateway);
    await expect.poll(() => upstream.held()).toBe(1);
    const refused = await get(gateway);
    expect([refused.status, refused.headers['retry-after']]).toEqual([429, '1']);
    upstream.answerAll();
    expect((await held).status).toBe(200);
    const next = get(gateway);
    await expect.poll(() => upstream.held()).toBe(1);
    upstream.answerAll();
    expect((await next).status).toBe(200);
  });

  it.each([
    ['deny', 503],
    ['allow', 200],
  ])('%s: every request is answered %i, and none takes a slot', async (onError, status) => {
    const { redis, gateway, upstream } = await fixture(onError);
    await redis.kill();
    const answers = [get(gateway), get(gateway)];
    if (status === 200) await expect.poll(() => upstream.held()).toBe(2);
    upstream.answerAll();
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual([status, status]);
  });
});
