import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { getMany, poolConfig, served, startPoolGateway } from '../helpers/pool-gateways.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { auth } from '../helpers/proxy-parts.js';
import { request } from '../helpers/raw-http.js';
import { accessLines, petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const defer = cleanupAfterEach();

const gatewayWith = (upstream: Record<string, unknown>, clock?: FakeClock): Promise<TestGateway> =>
  startPoolGateway(defer, upstream, clock);

/** A target that answers `/healthz` as `healthy()` says (200 or 500) and everything else with 200. */
async function target(
  healthy: () => boolean = () => true,
  handler?: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<TestUpstream> {
  const upstream = await startUpstream((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(healthy() ? 200 : 500).end();
      return;
    }
    if (handler) handler(req, res);
    else res.end('ok');
  });
  defer(() => upstream.close());
  return upstream;
}

/** Waits for the log line `msg` about `targetUrl`: the health checks' I/O is real, their time is the clock's. */
async function logged(gateway: TestGateway, msg: string, targetUrl: string): Promise<void> {
  await vi.waitFor(() =>
    expect(gateway.logs.some((line) => line.msg === msg && line.target === targetUrl)).toBe(true),
  );
}

const healthCheck = { path: '/healthz', interval: 1_000, timeout: 500, unhealthyAfter: 2, healthyAfter: 2 };

describe('an API with a pool of upstream targets', () => {
  it.each(['round-robin', 'least-requests'])(
    'spreads 400 requests by %s, each share within a quarter of its weight',
    async (balance) => {
      const [a, b, c] = [await target(), await target(), await target()];
      const gateway = await gatewayWith({
        targets: [a.url, { url: b.url, weight: 2 }, { url: c.url, weight: 1 }],
        balance,
      });
      expect(new Set(await getMany(gateway, 400))).toEqual(new Set([200]));
      const shares = [served(a), served(b), served(c)];
      for (const [i, expected] of [100, 200, 100].entries()) {
        expect(shares[i]).toBeGreaterThanOrEqual(expected * 0.75);
        expect(shares[i]).toBeLessThanOrEqual(expected * 1.25);
      }
    },
  );

  it('names the target that answered on the access line, and how many were tried', async () => {
    const [a, b] = [await target(), await target()];
    const gateway = await gatewayWith({ targets: [a.url, b.url] });
    await getMany(gateway, 2);
    const lines = accessLines(gateway);
    expect(lines.map(({ target: name, tried }) => [name, tried])).toEqual([
      [a.url, 1],
      [b.url, 1],
    ]);
  });

  it('sends to the target with the fewest requests in flight under least-requests', async () => {
    const held: ServerResponse[] = [];
    const holding = await target(undefined, (_req, res) => held.push(res));
    const quick = await target();
    const gateway = await gatewayWith({ targets: [holding.url, quick.url], balance: 'least-requests' });
    const first = request(gateway.url, { path: '/pets/held', headers: auth });
    await vi.waitFor(() => expect(held).toHaveLength(1));
    expect(new Set(await getMany(gateway, 6))).toEqual(new Set([200]));
    expect(served(quick)).toBe(6);
    expect(served(holding)).toBe(1);
    held[0]!.end('late');
    expect((await first).status).toBe(200);
  });

  it('answers 503 upstream_unavailable when no target can be reached, and logs the targets tried', async () => {
    const [a, b] = [await target(), await target()];
    await a.close();
    await b.close();
    const gateway = await gatewayWith({ targets: [a.url, b.url] });
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body)).toEqual({
      id: 'com.vendor.api.upstream_unavailable',
      message: 'Service Unavailable: no upstream target could be reached',
      success: false,
    });
    expect(res.body).not.toContain('127.0.0.1');
    await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(1));
    expect(accessLines(gateway)[0]).toMatchObject({
      status: 503,
      outcome: 'unreachable',
      target: b.url,
      tried: 2,
    });
    expect(gateway.logs.find((line) => line.msg === 'upstream exchange failed')).toMatchObject({
      targets: [a.url, b.url],
    });
  });

  it('sends a request whose connection was refused to another target, a POST too', async () => {
    const [a, b] = [await target(), await target()];
    await a.close();
    const gateway = await gatewayWith({ targets: [a.url, b.url] });
    expect(new Set(await getMany(gateway, 10))).toEqual(new Set([200]));
    const post = await request(gateway.url, {
      method: 'POST',
      path: '/pets',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"name":"rex"}',
    });
    expect(post.status).toBe(200);
    expect(served(b)).toBe(11);
    expect(b.requests.at(-1)).toMatchObject({ method: 'POST', body: '{"name":"rex"}' });
    const retried = accessLines(gateway).filter(({ tried }) => tried === 2);
    expect(retried.length).toBeGreaterThanOrEqual(5);
    expect(new Set(retried.map(({ target: name }) => name))).toEqual(new Set([b.url]));
  });

  it('sends a GET cut before any answer to another target, and never a POST whose body went out', async () => {
    const cutting = await target(undefined, (req) => req.socket.destroy());
    const b = await target();
    const gateway = await gatewayWith({ targets: [cutting.url, b.url] });
    const get = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(get.status).toBe(200);
    expect([served(cutting), served(b)]).toEqual([1, 1]);
    // Round-robin sends the next to b, and the one after to the cutting target.
    await request(gateway.url, { path: '/pets/2', headers: auth });
    const post = await request(gateway.url, {
      method: 'POST',
      path: '/pets',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"name":"rex"}',
    });
    // Nothing answered it (as Envoy says, 503 for a connection cut before the head).
    expect(JSON.parse(post.body).id).toBe('com.vendor.api.upstream_unavailable');
    expect(served(cutting)).toBe(2);
    expect(b.requests.filter(({ method }) => method === 'POST')).toHaveLength(0);
  });

  it('tries no other target with retries: 0', async () => {
    const [a, b] = [await target(), await target()];
    await a.close();
    const gateway = await gatewayWith({ targets: [a.url, b.url], retries: 0 });
    expect(await getMany(gateway, 2)).toEqual([503, 200]);
  });

  it('keeps the one-URL form as it was: 502 bad_gateway, and no target on the access line', async () => {
    const gone = await target();
    await gone.close();
    const gateway = await startTestGateway(petsConfig(gone.url));
    defer(() => gateway.close());
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(JSON.parse(res.body).id).toBe('com.vendor.api.bad_gateway');
    await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(1));
    expect(accessLines(gateway)[0]).not.toHaveProperty('target');
    expect(accessLines(gateway)[0]).not.toHaveProperty('tried');
  });
});

describe('the active health checks of a pool', () => {
  it('take a failing target out after two checks, and bring it back after two good ones', async () => {
    const clock = new FakeClock();
    let sick = true;
    const [a, b] = [await target(() => !sick), await target()];
    const gateway = await gatewayWith({ targets: [a.url, b.url], healthCheck }, clock);
    // The first check runs as the gateway starts; the second after one interval.
    await clock.advance(healthCheck.interval);
    await logged(gateway, 'upstream target out: its health checks fail', a.url);
    expect(new Set(await getMany(gateway, 10))).toEqual(new Set([200]));
    expect(served(a)).toBe(0);
    expect(served(b)).toBe(10);

    sick = false;
    await clock.advance(healthCheck.interval);
    await vi.waitFor(() => expect(a.requests.filter(({ url }) => url === '/healthz')).toHaveLength(3));
    await clock.advance(healthCheck.interval);
    await logged(gateway, 'upstream target back: its health checks pass', a.url);
    await getMany(gateway, 10);
    expect(served(a)).toBe(5);
  });

  it('gives GET clients no error once the checks have found a killed target', async () => {
    const clock = new FakeClock();
    const [a, b] = [await target(), await target()];
    const gateway = await gatewayWith({ targets: [a.url, b.url], healthCheck }, clock);
    await a.close();
    await clock.advance(healthCheck.interval);
    await clock.advance(healthCheck.interval);
    await logged(gateway, 'upstream target out: its health checks fail', a.url);
    expect(new Set(await getMany(gateway, 20))).toEqual(new Set([200]));
    expect(served(b)).toBe(20);
  });

  it('still tries the targets when every one is out, rather than refuse everything', async () => {
    const clock = new FakeClock();
    const [a, b] = [await target(() => false), await target(() => false)];
    const gateway = await gatewayWith({ targets: [a.url, b.url], healthCheck }, clock);
    await clock.advance(healthCheck.interval);
    await logged(gateway, 'upstream target out: its health checks fail', a.url);
    await logged(gateway, 'upstream target out: its health checks fail', b.url);
    expect(new Set(await getMany(gateway, 4))).toEqual(new Set([200]));
    expect([served(a), served(b)]).toEqual([2, 2]);
  });

  it('keeps what it found of the targets that remain across a reload', async () => {
    const clock = new FakeClock();
    const [a, b, c] = [await target(() => false), await target(), await target()];
    const gateway = await gatewayWith({ targets: [a.url, b.url], healthCheck }, clock);
    await clock.advance(healthCheck.interval);
    await logged(gateway, 'upstream target out: its health checks fail', a.url);
    const outcome = await gateway.reloadWith(poolConfig({ targets: [a.url, b.url, c.url], healthCheck }));
    expect(outcome).toMatchObject({ applied: true });
    expect(new Set(await getMany(gateway, 10))).toEqual(new Set([200]));
    expect(served(a)).toBe(0);
    expect([served(b), served(c)]).toEqual([5, 5]);
  });
});
