import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { request } from '../helpers/raw-http.js';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { spanKind, traceOf } from '../helpers/trace-trees.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

// The quota check span when the counter store cannot decide (a real redis-server, killed): `store.onError`
// 'deny' answers 503 and the span says so; 'allow' admits, and the span says admitted.

const executable = await redisServerPath();
const defer = cleanupAfterEach();

let receiver: OtlpReceiver;
let upstream: TestUpstream;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream();
});

afterAll(async () => {
  await upstream?.close();
  await receiver?.close();
});

/** A traced gateway over its own redis-server, its one quota of 100 requests an hour. */
async function fixture(onError: 'deny' | 'allow'): Promise<{ redis: RedisProcess; gateway: TestGateway }> {
  const redis = await startRedisProcess(executable!);
  defer(() => redis.stop());
  const gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, {
      store: { type: 'redis', url: redis.url, onError, prefix: `trace-${onError}:` },
      quotas: [{ id: systemQuotaId, type: 'API', name: 'System', restrictions: [throttle(100, 1, 'hour')] }],
      tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 },
    }),
  );
  defer(() => gateway.close());
  return { redis, gateway };
}

const get = async (gateway: TestGateway) =>
  (await request(gateway.url, { path: '/pets/3', headers: { authorization: basicAuth(devKey) } })).status;

describe.runIf(executable)('the quota check span when the counter store cannot decide', () => {
  it("deny: says refused with service_unavailable, as the 503's server span and access line do", async () => {
    const { redis, gateway } = await fixture('deny');
    expect(await get(gateway)).toBe(200);
    const admitted = await traceOf(gateway, receiver, 200);
    expect(admitted.one('quotagate.quota_check').attributes).toMatchObject({
      'quotagate.decision': 'admitted',
      'quotagate.store.trip': true,
    });
    await redis.kill();
    const sent = upstream.requests.length;
    expect(await get(gateway)).toBe(503);
    expect(upstream.requests).toHaveLength(sent);
    const line = accessLines(gateway).at(-1)!;
    const trace = await traceOf(gateway, receiver, 503);
    const check = trace.one('quotagate.quota_check');
    expect(check).toMatchObject({ kind: spanKind.internal, parentSpanId: trace.server.spanId });
    expect(check.attributes).toMatchObject({
      'quotagate.quota.restrictions': [`${systemQuotaId}/0`],
      'quotagate.decision': 'refused',
      'quotagate.refusal.code': 'service_unavailable',
      'quotagate.quota': 'unavailable',
      // It waited on the store's trip, which failed.
      'quotagate.store.trip': true,
    });
    // What the store could not read is not made up: no room left is claimed.
    expect(check.attributes['quotagate.ratelimit.remaining']).toBeUndefined();
    expect(line).toMatchObject({ status: 503, quota: 'unavailable' });
    expect(trace.server).toMatchObject({
      status: { code: 2 },
      attributes: {
        'http.response.status_code': 503,
        'error.type': '503',
        'quotagate.decision': 'refused',
        'quotagate.refusal.code': 'service_unavailable',
      },
    });
    // Nothing went upstream: the server span has the quota check and the authentication, no client span.
    expect(trace.spans.map((span) => span.name).sort()).toEqual([
      'GET /pets/{petId}',
      'quotagate.authenticate',
      'quotagate.quota_check',
    ]);
  });

  it('allow: says admitted, and the request goes upstream', async () => {
    const { redis, gateway } = await fixture('allow');
    expect(await get(gateway)).toBe(200);
    await redis.kill();
    const sent = upstream.requests.length;
    expect(await get(gateway)).toBe(200);
    expect(upstream.requests).toHaveLength(sent + 1);
    const line = accessLines(gateway).at(-1)!;
    const trace = await traceOf(gateway, receiver, 200);
    const check = trace.one('quotagate.quota_check');
    expect(check.status.code).toBe(0);
    expect(check.attributes).toMatchObject({
      'quotagate.decision': 'admitted',
      'quotagate.quota': 'allowed',
    });
    expect(check.attributes['quotagate.refusal.code']).toBeUndefined();
    expect(line).toMatchObject({ status: 200, quota: 'allowed' });
    expect(trace.server.attributes).toMatchObject({
      'http.response.status_code': 200,
      'quotagate.decision': 'admitted',
    });
    expect(trace.one('GET').attributes['quotagate.upstream.outcome']).toBe('completed');
  });
});
