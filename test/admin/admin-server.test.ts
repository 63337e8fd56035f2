import { afterEach, describe, expect, inject, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  adminUser,
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { freePort } from '../support/free-port.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

async function start(
  overrides: Record<string, unknown> = {},
): Promise<{ gateway: TestGateway; upstream: TestUpstream }> {
  const upstream = await startUpstream();
  stops.push(() => upstream.close());
  const gateway = await startTestGateway(petsConfig(upstream.url, overrides));
  stops.push(() => gateway.close());
  return { gateway, upstream };
}

describe('admin listener', () => {
  it('listens on its own port and answers /healthz', async () => {
    const { gateway } = await start();
    expect(gateway.adminUrl).not.toBe(gateway.url);
    const res = await fetch(`${gateway.adminUrl}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('answers /readyz with 200 on the memory store', async () => {
    const { gateway } = await start();
    const res = await fetch(`${gateway.adminUrl}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ready', checks: {} });
  });

  it('answers /readyz with 200 when the Redis store answers', async () => {
    const { gateway } = await start({ store: { type: 'redis', url: inject('redisUrl') } });
    const res = await fetch(`${gateway.adminUrl}/readyz`);
    expect(await res.json()).toEqual({ status: 'ready', checks: { redis: 'ok' } });
    expect(res.status).toBe(200);
  });

  it('answers /readyz with 503 when the Redis store is unreachable, and still serves /healthz', async () => {
    const { gateway } = await start({
      store: { type: 'redis', url: `redis://127.0.0.1:${await freePort()}` },
    });
    const res = await fetch(`${gateway.adminUrl}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'not ready', checks: { redis: 'unreachable' } });
    expect((await fetch(`${gateway.adminUrl}/healthz`)).status).toBe(200);
  });

  it('counts requests by api, method and status in Prometheus /metrics', async () => {
    const { gateway } = await start();
    await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(devKey) } });
    await request(gateway.url, { path: '/pets/1' });
    const res = await fetch(`${gateway.adminUrl}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toContain('quotagate_requests_total{api="Pet Store",method="getPet",status="200"} 1');
    expect(text).toContain('status="401"} 1');
    expect(text).toMatch(/quotagate_request_duration_seconds_bucket\{le="[^"]+",api="Pet Store"/);
  });

  it('answers unknown admin paths with a JSON 401 without credentials, and a JSON 404 with them', async () => {
    const { gateway } = await start();
    const anonymous = await fetch(`${gateway.adminUrl}/nope`);
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toEqual({
      errors: [{ code: 401, message: 'admin credentials are missing or wrong' }],
    });
    const res = await fetch(`${gateway.adminUrl}/nope`, { headers: { authorization: userAuth(adminUser) } });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ errors: [{ code: 404, message: 'Not Found' }] });
  });
});
