import { once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore, get, mobileKey, tooMany, webKey } from '../helpers/enforcement-gateways.js';
import { startHoldingUpstream, type HoldingUpstream } from '../helpers/holding-upstream.js';
import {
  applicationDefaultQuotaId,
  basicAuth,
  concurrency,
  devKey,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

/**
 * `concurrency`: at most N requests of its scope in flight at once. The upstream here holds every answer
 * until the test lets it go, so the requests it holds are in flight for as long as the test needs.
 */
const defer = cleanupAfterEach();
const applications = [
  { id: '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e', name: 'Mobile', apikey_development: mobileKey },
  { id: '5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a', name: 'Web', apikey_development: webKey },
];

const setSystem = (gateway: TestGateway, ...restrictions: object[]) =>
  setQuota(gateway, { type: 'API', name: 'System', restrictions }, systemQuotaId);

const inFlightOf = async (gateway: TestGateway, quotaId = systemQuotaId, index = 0) =>
  (await quotaUsage(gateway.adminUrl, quotaId)).restrictions[index]!.used;

describe.each(eachStore)('a concurrency restriction on %s', (_storeName, store) => {
  async function gatewayOverHolding(): Promise<[TestGateway, HoldingUpstream]> {
    const upstream = await startHoldingUpstream();
    defer(() => upstream.close());
    const gateway = await startTestGateway(petsConfig(upstream.url, { applications, ...store() }));
    defer(() => gateway.close());
    return [gateway, upstream];
  }

  /** Starts `count` requests that the upstream holds, and waits until it holds them all. */
  async function hold(gateway: TestGateway, upstream: HoldingUpstream, count: number, key = devKey) {
    const before = upstream.held();
    const answers = Array.from({ length: count }, () => get(gateway, key));
    await expect.poll(() => upstream.held()).toBe(before + count);
    return answers;
  }

  it('admits N requests in flight and answers the next 429 with Retry-After: 1 and the RateLimit fields naming it', async () => {
    const [gateway, upstream] = await gatewayOverHolding();
    await setSystem(gateway, concurrency(2));
    const held = await hold(gateway, upstream, 2);
    const refused = await get(gateway);
    expect([refused.status, refused.body]).toEqual([429, tooMany]);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/0";q=2;qu="concurrent-requests"`);
    expect(refused.headers.ratelimit).toBe(`"${systemQuotaId}/0";r=0;t=1`);
    expect(await inFlightOf(gateway)).toBe(2);

    upstream.answerOne();
    expect((await held[0]!).status).toBe(200);
    // The slot is free once the request has ended: the next one takes it, and says none is left (it and
    // the second hold both); the one after it is refused again.
    await expect.poll(() => inFlightOf(gateway)).toBe(1);
    const next = get(gateway);
    await expect.poll(() => upstream.held()).toBe(2);
    expect(await inFlightOf(gateway)).toBe(2);
    expect((await get(gateway)).status).toBe(429);
    upstream.answerAll();
    const [second, third] = await Promise.all([held[1]!, next]);
    expect([second.status, third.status]).toEqual([200, 200]);
    expect(third.headers.ratelimit).toBe(`"${systemQuotaId}/0";r=0;t=1`);
    await expect.poll(() => inFlightOf(gateway)).toBe(0);
  });

  it('takes no slot for a request another restriction refuses', async () => {
    const [gateway, upstream] = await gatewayOverHolding();
    await setSystem(gateway, concurrency(1));
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(1, 1, 'hour')] },
      applicationDefaultQuotaId,
    );
    const first = await hold(gateway, upstream, 1, mobileKey);
    upstream.answerAll();
    expect((await first[0]!).status).toBe(200);
    await expect.poll(() => inFlightOf(gateway)).toBe(0);
    // Mobile's throttle is spent: refused, and the one slot stays free for Web.
    const refused = await get(gateway, mobileKey);
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).not.toBe('1');
    expect(await inFlightOf(gateway)).toBe(0);
    const web = await hold(gateway, upstream, 1, webKey);
    upstream.answerAll();
    expect((await web[0]!).status).toBe(200);
  });

  it('frees the slot of a client that leaves mid-request', async () => {
    const [gateway, upstream] = await gatewayOverHolding();
    await setSystem(gateway, concurrency(1));
    const socket = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
    socket.write(`GET /pets/1 HTTP/1.1\r\nHost: pets\r\nAuthorization: ${basicAuth(devKey)}\r\n\r\n`);
    await expect.poll(() => upstream.held()).toBe(1);
    expect((await get(gateway)).status).toBe(429);
    socket.destroy();
    await expect.poll(() => inFlightOf(gateway)).toBe(0);
    const next = await hold(gateway, upstream, 1);
    upstream.answerAll();
    expect((await next[0]!).status).toBe(200);
  });

  it('frees the slot of a request whose upstream failed, once its 502 is sent', async () => {
    const gateway = await startTestGateway(petsConfig('http://127.0.0.1:9', { applications, ...store() }));
    defer(() => gateway.close());
    await setSystem(gateway, concurrency(1));
    expect([(await get(gateway)).status, (await get(gateway)).status]).toEqual([502, 502]);
    await expect.poll(() => inFlightOf(gateway)).toBe(0);
  });

  it('holds the slot of a stream of server-sent events for as long as it is open', async () => {
    let stream: ServerResponse | null = null;
    const upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      stream = res;
    });
    defer(() => upstream.close());
    const gateway = await startTestGateway(petsConfig(upstream.url, { applications, ...store() }));
    defer(() => gateway.close());
    await setSystem(gateway, concurrency(1));
    const events = await new Promise<IncomingMessage>((resolve, reject) =>
      http
        .get(`${gateway.url}/pets/events`, { headers: { authorization: basicAuth(devKey) } }, resolve)
        .on('error', reject),
    );
    const [first] = (await once(events, 'data')) as [Buffer];
    expect(String(first)).toBe('data: first\n\n');
    expect((await get(gateway)).status).toBe(429);
    stream!.end('data: last\n\n');
    await once(events, 'end');
    await expect.poll(() => inFlightOf(gateway)).toBe(0);
  });

  it("counts each application apart under an application's quota", async () => {
    const [gateway, upstream] = await gatewayOverHolding();
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [concurrency(1)] },
      applicationDefaultQuotaId,
    );
    const held = [
      ...(await hold(gateway, upstream, 1, mobileKey)),
      ...(await hold(gateway, upstream, 1, webKey)),
    ];
    expect((await get(gateway, mobileKey)).status).toBe(429);
    const usage = await quotaUsage(gateway.adminUrl, applicationDefaultQuotaId);
    expect(usage.restrictions[0]!.applications!.map(({ name, used }) => [name, used])).toEqual([
      ['Mobile', 1],
      ['Web', 1],
    ]);
    upstream.answerAll();
    for (const answer of held) expect((await answer).status).toBe(200);
  });

  it('in shadow mode counts the requests in flight and refuses none, reporting what it would have refused', async () => {
    const [gateway, upstream] = await gatewayOverHolding();
    await setSystem(gateway, concurrency(1, { mode: 'shadow' }));
    const held = await hold(gateway, upstream, 2);
    expect(await inFlightOf(gateway)).toBe(1);
    upstream.answerAll();
    for (const answer of held) expect((await answer).status).toBe(200);
    await expect.poll(() => inFlightOf(gateway)).toBe(0);
    const shadowRefused = gateway.logs.filter((line) => line.quota === 'shadow_refused');
    expect(shadowRefused.map((line) => line.refusedBy)).toEqual([`${systemQuotaId}/0`]);
  });

  it('shows the caller its requests in flight on the usage path, as it sees its other restrictions', async () => {
    const [gateway, upstream] = await gatewayOverHolding();
    await setSystem(gateway, concurrency(3));
    const held = await hold(gateway, upstream, 2);
    const usage = await get(gateway, devKey, '/_quotagate/usage');
    expect(JSON.parse(usage.body).restrictions).toEqual([
      expect.objectContaining({
        type: 'concurrency',
        unit: 'concurrent-requests',
        limit: 3,
        used: 2,
        remaining: 1,
        windowSeconds: 0,
        resetSeconds: 0,
      }),
    ]);
    upstream.answerAll();
    for (const answer of held) expect((await answer).status).toBe(200);
  });
});
