import type { ServerResponse } from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { auth } from '../helpers/proxy-parts.js';
import { request } from '../helpers/raw-http.js';
import {
  adminUser,
  memberUser,
  petsApiId,
  petsConfig,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const defer = cleanupAfterEach();
type Counts = Record<'requests' | 'failures' | 'retries', number>;
const ordersApiId = '7d3c2b1a-0f9e-4d8c-b7a6-5e4d3c2b1a09';
const healthCheck = { path: '/healthz', interval: 1_000, timeout: 500, unhealthyAfter: 2, healthyAfter: 2 };

/** The pets API with `upstream` (a pool), and an orders API of one URL beside it. */
function configWith(upstream: Record<string, unknown>, orders: string): Record<string, unknown> {
  const config = petsConfig('http://127.0.0.1:1');
  const [pets] = config.apis as Array<Record<string, unknown>>;
  const ordersApi = {
    id: ordersApiId,
    name: 'Orders',
    basePath: '/orders',
    upstream: orders,
    methods: [{ id: 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d', name: 'listOrders', verb: 'GET', path: '/' }],
  };
  return { ...config, apis: [{ ...pets, upstream }, ordersApi] };
}

/** A target that answers `/healthz` as `healthy()` says, holds what `hold` says, and answers the rest. */
async function target(healthy: () => boolean = () => true, held?: ServerResponse[]): Promise<TestUpstream> {
  const upstream = await startUpstream((req, res) => {
    if (req.url === '/healthz') res.writeHead(healthy() ? 200 : 500).end();
    else if (held && req.url?.includes('held')) held.push(res);
    else res.end('ok');
  });
  defer(() => upstream.close());
  return upstream;
}

async function gatewayWith(config: Record<string, unknown>, clock?: FakeClock): Promise<TestGateway> {
  const gateway = await startTestGateway(config, {}, clock ? { timers: clock } : {});
  defer(() => gateway.close());
  return gateway;
}

/** GET `path` of the admin port as `user` (null: without credentials). */
async function admin(
  gateway: TestGateway,
  path: string,
  user: { username: string; password: string } | null = adminUser,
): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = user ? { authorization: userAuth(user) } : {};
  const res = await fetch(`${gateway.adminUrl}${path}`, { headers });
  return { status: res.status, body: await res.json() };
}

/** What a target of one URL reports: its exchanges are counted in `/metrics` alone. */
const nothingCounted = { ejections: 0, inFlight: 0, requests: 0, failures: 0, retries: 0 };

describe('GET /api/portal/v1.3/upstreams', () => {
  it("lists each API's targets with their weight, health and counts, and an API of one URL with its one", async () => {
    const [a, b] = [await target(), await target()];
    const orders = await target();
    const refused = await target();
    await refused.close();
    const gateway = await gatewayWith(
      configWith(
        { targets: [a.url, { url: b.url, weight: 2 }, refused.url], balance: 'least-requests' },
        orders.url,
      ),
    );
    for (let i = 0; i < 8; i += 1)
      expect((await request(gateway.url, { path: `/pets/${i}`, headers: auth })).status).toBe(200);
    const { status, body } = await admin(gateway, '/api/portal/v1.3/upstreams');
    expect(status).toBe(200);
    const [pets, ordersState] = body as Array<{ targets: Array<Record<string, number>> }>;
    expect(pets).toMatchObject({
      api: petsApiId,
      name: 'Pet Store',
      balance: 'least-requests',
      healthCheck: false,
    });
    const [first, second, third] = pets!.targets as [Counts, Counts, Counts];
    expect(
      pets!.targets.map(({ url, weight, healthy, inFlight }) => [url, weight, healthy, inFlight]),
    ).toEqual([
      [a.url, 1, true, 0],
      [b.url, 2, true, 0],
      [refused.url, 1, true, 0],
    ]);
    // Every exchange sent to the refusing target failed there and went on to another, as a retry.
    expect(third.failures).toBe(third.requests);
    expect(third.requests).toBeGreaterThan(0);
    expect(first.retries + second.retries).toBe(third.failures);
    expect(first.requests + second.requests).toBe(8);
    expect(first.failures + second.failures).toBe(0);
    expect(ordersState).toEqual({
      api: ordersApiId,
      name: 'Orders',
      balance: null,
      healthCheck: false,
      targets: [{ url: orders.url, host: null, weight: 1, healthy: true, ejected: false, ...nothingCounted }],
    });
  });

  it('counts the exchanges in flight to each target', async () => {
    const held: ServerResponse[] = [];
    const [a, b] = [await target(undefined, held), await target(undefined, held)];
    const gateway = await gatewayWith(configWith({ targets: [a.url, b.url] }, a.url));
    const pending = [1, 2, 3].map((i) => request(gateway.url, { path: `/pets/held-${i}`, headers: auth }));
    await vi.waitFor(() => expect(held).toHaveLength(3));
    const { body } = await admin(gateway, '/api/portal/v1.3/upstreams');
    const [pets] = body as Array<{ targets: Array<{ inFlight: number }> }>;
    expect(pets!.targets.map(({ inFlight }) => inFlight).sort()).toEqual([1, 2]);
    for (const res of held) res.end('late');
    await Promise.all(pending);
  });

  it('answers an admin and a member, and nobody without credentials', async () => {
    const a = await target();
    const gateway = await gatewayWith(configWith({ targets: [a.url] }, a.url));
    expect((await admin(gateway, '/api/portal/v1.3/upstreams', memberUser)).status).toBe(200);
    expect((await admin(gateway, '/api/portal/v1.4/upstreams')).status).toBe(200);
    const anonymous = await admin(gateway, '/api/portal/v1.3/upstreams', null);
    expect(anonymous.status).toBe(401);
    expect(JSON.stringify(anonymous.body)).not.toContain(a.url);
  });

  it('is in the admin OpenAPI document, with the shape it answers', async () => {
    const a = await target();
    const gateway = await gatewayWith(configWith({ targets: [a.url] }, a.url));
    const { body } = await admin(gateway, '/api/portal/v1.3/openapi.json', null);
    const operation = (body as { paths: Record<string, Record<string, Record<string, unknown>>> }).paths[
      '/api/portal/v1.3/upstreams'
    ]?.get;
    expect(operation).toMatchObject({ operationId: 'getUpstreams', tags: ['upstreams'] });
    const ok = (operation!.responses as Record<string, { content: Record<string, { schema: unknown }> }>)[
      '200'
    ];
    const schema = ok!.content['application/json']!.schema as {
      type: string;
      items: { properties: Record<string, { properties?: Record<string, unknown> }> };
    };
    expect(schema.type).toBe('array');
    expect(Object.keys(schema.items.properties)).toEqual([
      'api',
      'name',
      'balance',
      'healthCheck',
      'targets',
    ]);
  });
});

describe('/readyz with pools of upstream targets', () => {
  it('stays ready while one target of the pool is healthy, and is not ready once every one is out', async () => {
    const clock = new FakeClock();
    let aSick = true;
    let bSick = false;
    const [a, b] = [await target(() => !aSick), await target(() => !bSick)];
    const gateway = await gatewayWith(configWith({ targets: [a.url, b.url], healthCheck }, a.url), clock);
    const healthChecks = () =>
      [a, b].map((each) => each.requests.filter(({ url }) => url === '/healthz').length);
    const checkRound = async (done: number) => {
      await clock.advance(healthCheck.interval);
      await vi.waitFor(() => expect(healthChecks()).toEqual([done, done]));
    };
    const healthOfTargets = async () => {
      const { body } = await admin(gateway, '/api/portal/v1.3/upstreams');
      return (body as Array<{ targets: Array<{ healthy: boolean }> }>)[0]!.targets.map((t) => t.healthy);
    };
    await vi.waitFor(() => expect(healthChecks()).toEqual([1, 1]));
    await checkRound(2);
    await vi.waitFor(async () => expect(await healthOfTargets()).toEqual([false, true]));
    expect(await admin(gateway, '/readyz', null)).toEqual({
      status: 200,
      body: { status: 'ready', checks: { upstreams: 'ok' } },
    });

    bSick = true;
    await checkRound(3);
    await checkRound(4);
    await vi.waitFor(async () => expect(await healthOfTargets()).toEqual([false, false]));
    expect(await admin(gateway, '/readyz', null)).toEqual({
      status: 503,
      body: { status: 'not ready', checks: { upstreams: 'unreachable' } },
    });

    aSick = false;
    await checkRound(5);
    await checkRound(6);
    await vi.waitFor(async () => expect(await healthOfTargets()).toEqual([true, false]));
    expect((await admin(gateway, '/readyz', null)).status).toBe(200);
  });

  it('stays ready when every target of a pool without health checks refuses', async () => {
    const refused = await target();
    await refused.close();
    const gateway = await gatewayWith(configWith({ targets: [refused.url] }, refused.url));
    expect((await request(gateway.url, { path: '/pets/1', headers: auth })).status).toBe(503);
    expect((await admin(gateway, '/readyz', null)).status).toBe(200);
  });
});
