import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { startRedis, type RedisService } from '../helpers/redis-server.js';
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
import { childrenOf, onlyOf, parentOf, spanKind } from '../helpers/trace-trees.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const defer = cleanupAfterEach();
const clientTrace = '5bf92f3577b34da6a3ce929d0e0e4737';
const traceparent = `00-${clientTrace}-10f067aa0ba902b8-01`;

let receiver: OtlpReceiver;
let upstream: TestUpstream;
let redis: RedisService;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream();
  redis = await startRedis();
});

afterAll(async () => {
  await redis.stop();
  await upstream.close();
  await receiver.close();
});

/** A gateway tracing every exchange to the receiver, its one API quota of `limit` requests an hour. */
async function tracedGateway(limit: number, overrides: Record<string, unknown> = {}, clock?: FakeClock) {
  const quota = {
    id: systemQuotaId,
    type: 'API',
    name: 'System',
    restrictions: [throttle(limit, 1, 'hour')],
  };
  const config = petsConfig(`${upstream.url}/pets`, {
    tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 },
    quotas: [quota],
    ...overrides,
  });
  const gateway = await startTestGateway(config, {}, clock ? { clock: clock.now, timers: clock } : {});
  defer(() => gateway.close());
  return gateway;
}

async function get(gateway: TestGateway, fields: string[] = []) {
  const res = await request(`${gateway.url}/pets/3`, {
    headers: ['authorization', basicAuth(devKey), ...fields],
  });
  await res.body.dump();
  return res.statusCode;
}

/** The spans of the exchange whose access line is `line`: its server span and those under it. */
async function treeOf(line: Record<string, unknown>) {
  for (;;) {
    const server = receiver.spans.find((span) => span.attributes['quotagate.request_id'] === line.requestId);
    if (server) return { server, children: childrenOf(receiver.spans, server) };
    await receiver.waitForSpans(receiver.spans.length + 1);
  }
}

const quotaCheckOf = (children: ReceivedSpan[]) =>
  children.find((span) => span.name === 'quotagate.quota_check')!;

describe('the quota check span', () => {
  it('hangs the quota check and the upstream client span under the server span of an admitted request', async () => {
    const gateway = await tracedGateway(5);
    expect(await get(gateway, ['traceparent', traceparent])).toBe(200);
    const { server, children } = await treeOf(accessLines(gateway).at(-1)!);
    expect(server.traceId).toBe(clientTrace);
    expect(children.map(({ name, kind }) => [name, kind]).sort()).toEqual([
      ['GET', spanKind.client],
      ['quotagate.authenticate', spanKind.internal],
      ['quotagate.quota_check', spanKind.internal],
    ]);
    const check = quotaCheckOf(children);
    expect(check.status.code).toBe(0);
    expect(check.attributes).toMatchObject({
      'quotagate.quota.restrictions': [`${systemQuotaId}/0`],
      'quotagate.quota.restriction_count': 1,
      'quotagate.decision': 'admitted',
      'quotagate.quota': 'allowed',
      // The memory store decides at once: no trip.
      'quotagate.store.trip': false,
      'quotagate.ratelimit.remaining': 4,
      'quotagate.ratelimit.policy': `"${systemQuotaId}/0";q=5;w=3600`,
    });
    const client = onlyOf(children, spanKind.client);
    expect(client.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.response.status_code': 200,
      'url.full': `${upstream.url}/pets/3`,
      'server.address': '127.0.0.1',
      'server.port': Number(new URL(upstream.url).port),
      'quotagate.upstream.outcome': 'completed',
    });
    expect(client.attributes['http.request.resend_count']).toBeUndefined();
    // The upstream's parent is the client span, not the server span.
    expect(parentOf(upstream.requests.at(-1)!.headers.traceparent as string)).toBe(client.spanId);
  });

  it('refuses a 429 in the quota check span, and makes no client span', async () => {
    const gateway = await tracedGateway(1);
    expect(await get(gateway)).toBe(200);
    const sent = upstream.requests.length;
    expect(await get(gateway)).toBe(429);
    expect(upstream.requests).toHaveLength(sent);
    const { server, children } = await treeOf(accessLines(gateway).at(-1)!);
    expect(server.attributes['http.response.status_code']).toBe(429);
    expect(children.map(({ name }) => name).sort()).toEqual([
      'quotagate.authenticate',
      'quotagate.quota_check',
    ]);
    expect(quotaCheckOf(children).attributes).toMatchObject({
      'quotagate.decision': 'refused',
      'quotagate.refusal.code': 'quota_exceeded',
      'quotagate.quota': 'rejected',
      'quotagate.refused_by': `${systemQuotaId}/0`,
      'quotagate.ratelimit.remaining': 0,
      'quotagate.store.trip': false,
    });
  });

  it('marks the trip to Redis of a first request, and none once a lease decides', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 5, 12));
    const gateway = await tracedGateway(
      10_000,
      { store: { type: 'redis', url: redis.url, prefix: 'trace-trips:' } },
      clock,
    );
    for (let call = 0; call < 40; call += 1) {
      expect(await get(gateway)).toBe(200);
      // 4 ms apart: a rate the leases can measure.
      await clock.advance(4);
    }
    const trips: boolean[] = [];
    for (const line of accessLines(gateway)) {
      const check = quotaCheckOf((await treeOf(line)).children);
      trips.push(check.attributes['quotagate.store.trip'] as boolean);
      expect(check.attributes['quotagate.decision']).toBe('admitted');
    }
    // Trips until the rate is measured and a lease granted; from then on, its checks are decided here.
    const leased = trips.indexOf(false);
    expect(leased).toBeGreaterThan(0);
    expect(trips.slice(0, leased).every(Boolean)).toBe(true);
    expect(trips.slice(leased).some(Boolean)).toBe(false);
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    const counted = /^quotagate_store_trips_total (\d+)/m.exec(metrics);
    // Every check that says it made a trip made one (trips also carry give-backs and slots).
    expect(trips.filter(Boolean).length).toBeLessThanOrEqual(Number(counted![1]));
  });
});

describe('tracing off', () => {
  it('makes no span, and passes the client traceparent on as any other field', async () => {
    const config = petsConfig(`${upstream.url}/pets`, {
      tracing: { enabled: false, endpoint: receiver.url, scheduledDelay: 10 },
      quotas: [{ id: systemQuotaId, type: 'API', name: 'System', restrictions: [throttle(5, 1, 'hour')] }],
    });
    const gateway = await startTestGateway(config);
    const before = receiver.requests.length;
    expect(await get(gateway, ['traceparent', traceparent, 'tracestate', 'a=1'])).toBe(200);
    await gateway.close();
    expect(upstream.requests.at(-1)!.headers).toMatchObject({ traceparent, tracestate: 'a=1' });
    expect(accessLines(gateway).at(-1)!.traceId ?? null).toBeNull();
    expect(receiver.requests).toHaveLength(before);
  });
});
