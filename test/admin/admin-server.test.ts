import { afterEach, describe, expect, inject, it } from 'vitest';
import { rawExchange, request } from '../helpers/raw-http.js';
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
import { freePort } from '../helpers/free-port.js';
import { adminHostCheck } from '../../src/admin/admin-hosts.js';

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
    expect(await res.json()).toEqual({ status: 'ready', checks: { upstreams: 'ok' } });
  });

  it('answers /readyz with 200 when the Redis store answers', async () => {
    const { gateway } = await start({ store: { type: 'redis', url: inject('redisUrl') } });
    const res = await fetch(`${gateway.adminUrl}/readyz`);
    expect(await res.json()).toEqual({ status: 'ready', checks: { redis: 'ok', upstreams: 'ok' } });
    expect(res.status).toBe(200);
  });

  it('answers /readyz with 503 when the Redis store is unreachable, and still serves /healthz', async () => {
    const { gateway } = await start({
      store: { type: 'redis', url: `redis://127.0.0.1:${await freePort()}` },
    });
    const res = await fetch(`${gateway.adminUrl}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      status: 'not ready',
      checks: { redis: 'unreachable', upstreams: 'ok' },
    });
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

describe('admin listener: the Host names it answers (DNS rebinding)', () => {
  const metricsWith = (gateway: TestGateway, host: string, path = '/metrics') =>
    request(gateway.adminUrl, { path, headers: { host } });

  it('answers its own names and IP literals, whatever their case, port or trailing dot', async () => {
    const { gateway } = await start();
    const port = new URL(gateway.adminUrl).port;
    for (const host of [
      `127.0.0.1:${port}`,
      '127.0.0.1',
      `localhost:${port}`,
      `LocalHost.:${port}`,
      `[::1]:${port}`,
      `console.localhost:${port}`,
      `10.1.2.3:${port}`,
      `[fd00::1]:9000`,
    ])
      expect((await metricsWith(gateway, host)).status, host).toBe(200);
  });

  it('refuses with 421 a name another site could rebind to this address, on every route, before credentials are read', async () => {
    const { gateway } = await start();
    const port = new URL(gateway.adminUrl).port;
    for (const path of [
      '/metrics',
      '/healthz',
      '/readyz',
      '/api/portal/v1.3/openapi.json',
      '/console/',
      '/nothing-here',
    ]) {
      const refused = await metricsWith(gateway, `rebind.attacker.example:${port}`, path);
      expect(refused.status, path).toBe(421);
      expect(JSON.parse(refused.body)).toEqual({
        errors: [
          {
            code: 421,
            message:
              'This listener does not answer the name rebind.attacker.example: add it to admin.allowedHosts',
          },
        ],
      });
    }
    const api = await request(gateway.adminUrl, {
      path: '/api/portal/v1.3/quotas',
      headers: { host: `localhost.attacker.example:${port}`, authorization: userAuth(adminUser) },
    });
    expect(api.status).toBe(421);
    // Spellings that are not an IP literal are names: a decimal address, a bracketed name, two Hosts.
    expect((await metricsWith(gateway, '2130706433')).status).toBe(421);
    expect((await metricsWith(gateway, '[attacker.example]')).status).toBe(421);
    const twoHosts = await rawExchange(
      gateway.adminUrl,
      'GET /metrics HTTP/1.1\r\nHost: localhost\r\nHost: rebind.attacker.example\r\nConnection: close\r\n\r\n',
    );
    expect(twoHosts).toMatch(/^HTTP\/1\.1 400 /);
    // An absolute-form target names the host the request is for (RFC 9112 3.2.2): it is checked too.
    expect(
      (
        await request(gateway.adminUrl, {
          path: 'http://rebind.attacker.example/metrics',
          headers: { host: 'localhost' },
        })
      ).status,
    ).toBe(421);
  });

  it('answers the names of admin.allowedHosts, a leading dot allowing the subdomains', async () => {
    const { gateway } = await start({
      admin: {
        host: '127.0.0.1',
        port: 0,
        users: [adminUser],
        allowedHosts: ['quotagate-admin.internal', '.ops.example'],
      },
    });
    for (const host of [
      'quotagate-admin.internal:8081',
      'ops.example',
      'grafana.ops.example',
      'QUOTAGATE-ADMIN.INTERNAL',
    ])
      expect((await metricsWith(gateway, host)).status, host).toBe(200);
    for (const host of ['admin.internal', 'xops.example', 'quotagate-admin.internal.attacker.example'])
      expect((await metricsWith(gateway, host)).status, host).toBe(421);
  });
});

describe('admin listener: admin.allowedHosts on reload', () => {
  it('answers a name added by a reload, and no longer one it removed', async () => {
    const upstream = await startUpstream();
    stops.push(() => upstream.close());
    const config = petsConfig(upstream.url);
    const gateway = await startTestGateway(config);
    stops.push(() => gateway.close());
    const admin = config.admin as Record<string, unknown>;
    const health = () =>
      request(gateway.adminUrl, { path: '/healthz', headers: { host: 'admin.ops.example' } });
    expect((await health()).status).toBe(421);
    await gateway.reloadWith({ ...config, admin: { ...admin, allowedHosts: ['admin.ops.example'] } });
    expect((await health()).status).toBe(200);
    await gateway.reloadWith(config);
    expect((await health()).status).toBe(421);
  });
});

describe('the Host names of the admin listener', () => {
  it('include admin.host when it is a name, and nothing for a wildcard address', () => {
    const named = adminHostCheck({ host: 'admin.corp.example', allowedHosts: [] });
    expect(named('admin.corp.example:8081')).toBe(true);
    expect(named('corp.example')).toBe(false);
    const wildcard = adminHostCheck({ host: '0.0.0.0', allowedHosts: [] });
    expect(wildcard('0.0.0.0')).toBe(true);
    expect(wildcard('gateway.corp.example')).toBe(false);
    expect(wildcard(undefined)).toBe(true);
  });
});
