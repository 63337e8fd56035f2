import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get } from '../helpers/enforcement-gateways.js';
import { redisServerPath, startRedisProcess } from '../helpers/redis-process.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

/**
 * A client that hangs up while its quota decision waits on a slow Redis (issue 42, point 15): its access
 * line says the client left (status 499, outcome `client_aborted`), not `200` with nothing sent, and the
 * decision that comes later sends nothing upstream.
 */
const executable = await redisServerPath();
const defer = cleanupAfterEach();

const tripsOf = async (gateway: TestGateway) =>
  Number(
    (await (await fetch(`${gateway.adminUrl}/metrics`)).text()).match(
      /^quotagate_store_trips_total (\d+)$/m,
    )?.[1],
  );

describe.runIf(executable)('a client that leaves while its quota decision waits on Redis', () => {
  it('is logged as the client leaving, and its request never goes upstream', async () => {
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const redis = await startRedisProcess(executable!);
    defer(() => redis.stop());
    // A slow Redis is waited for up to store.commandTimeout before a PING is asked: 10 s, longer than the test.
    const gateway = await startTestGateway(
      petsConfig(upstream.url, {
        store: { type: 'redis', url: redis.url, prefix: 'left:', commandTimeout: 10_000 },
      }),
    );
    defer(() => gateway.close());
    // A test that fails while Redis is frozen still closes its gateway.
    defer(() => redis.resume());
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(50, 1, 'hour')] },
      systemQuotaId,
    );
    const tripsBefore = await tripsOf(gateway);

    redis.pause();
    const client = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
    client.on('error', () => undefined);
    client.write(`GET /pets/left HTTP/1.1\r\nHost: gw\r\nAuthorization: ${basicAuth(devKey)}\r\n\r\n`);
    // The decision is on its way to the frozen Redis: the client hangs up while it waits.
    await expect.poll(() => tripsOf(gateway)).toBeGreaterThan(tripsBefore);
    client.destroy();
    await expect.poll(() => accessLines(gateway).length).toBe(1);
    expect(accessLines(gateway)[0]).toMatchObject({
      path: '/pets/left',
      status: 499,
      outcome: 'client_aborted',
      quota: null,
      bytesOut: 0,
    });

    redis.resume();
    // Redis answers in order: the late decision is made before the next request's.
    expect((await get(gateway, devKey, '/pets/after')).status).toBe(200);
    expect(upstream.requests.map((seen) => seen.url)).toEqual(['/after']);
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toContain('quotagate_requests_total{api="Pet Store",method="getPet",status="499"} 1');
  });
});
