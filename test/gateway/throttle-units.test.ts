import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore, get, startFleetOfTwo } from '../helpers/enforcement-gateways.js';
import {
  accessLines,
  quotaUsage,
  setQuota,
  startTestGateway,
  petsConfig,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

/**
 * throttleunits: a restriction on what the upstream says each exchange cost (tokens, credits, rows), read
 * from a response header or trailer when the exchange ends. The upstream here answers `/pets/<cost>`
 * with that cost in `X-Tokens`; `/pets/<cost>?trailer` sends it as a trailer; `/pets/none` sends none,
 * `/pets/many` sends it twice.
 */
const defer = cleanupAfterEach();

function costingUpstream(req: IncomingMessage, res: ServerResponse): void {
  const [path = '', query] = (req.url ?? '').split('?');
  const cost = path.split('/').at(-1) ?? '';
  if (query === 'trailer') {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'X-Tokens' });
    res.write('counted in the trailer');
    res.addTrailers({ 'X-Tokens': cost });
    res.end();
    return;
  }
  const fields: Array<[string, string]> = [['content-type', 'text/plain']];
  if (cost === 'many') fields.push(['x-tokens', '1'], ['x-tokens', '2']);
  else if (cost !== 'none') fields.push(['x-tokens', cost]);
  res.writeHead(200, fields.flat());
  res.end('ok');
}

const tokens = (units: number, extra: Record<string, unknown> = {}) => ({
  api: '*',
  method: '*',
  type: 'throttleunits',
  config: { units, per: 1, period: 'hour', header: 'X-Tokens', ...extra },
});

const setTokens = (gateway: TestGateway, restriction: Record<string, unknown>) =>
  setQuota(gateway, { type: 'API', name: 'System', restrictions: [restriction] }, systemQuotaId);

const usedOf = async (gateway: TestGateway) =>
  (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]!.used;

describe.each(eachStore)('throttleunits on %s', (storeName, store) => {
  async function gatewayWith(): Promise<TestGateway> {
    const upstream = await startUpstream(costingUpstream);
    defer(() => upstream.close());
    const gateway = await startTestGateway(petsConfig(`${upstream.url}/pets`, store()));
    defer(() => gateway.close());
    return gateway;
  }

  it('charges what the header or the trailer says when the exchange ends, and refuses once the counter is at its limit', async () => {
    const gateway = await gatewayWith();
    await setTokens(gateway, tokens(10));
    const first = await get(gateway, undefined, '/pets/4');
    expect(first.status).toBe(200);
    expect(first.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/0";q=10;w=3600;qu="units"`);
    // Nothing is charged before the answer: the first request saw the whole limit.
    expect(first.headers.ratelimit).toMatch(new RegExp(`^"${systemQuotaId}/0";r=10;t=\\d+$`));
    await expect.poll(() => usedOf(gateway)).toBe(4);

    const trailer = await get(gateway, undefined, '/pets/5?trailer');
    expect([trailer.status, trailer.body]).toEqual([200, 'counted in the trailer']);
    await expect.poll(() => usedOf(gateway)).toBe(9);
    // At 9 of 10 there is room: this one goes, and its 3 take the counter past the limit (the overshoot).
    expect((await get(gateway, undefined, '/pets/3')).status).toBe(200);
    await expect.poll(() => usedOf(gateway)).toBe(12);
    const refused = await get(gateway, undefined, '/pets/1');
    expect(refused.status).toBe(429);
    expect(refused.headers.ratelimit).toMatch(new RegExp(`^"${systemQuotaId}/0";r=0;t=\\d+$`));
    expect(accessLines(gateway).at(-1)).toMatchObject({ quota: 'rejected', refusedBy: `${systemQuotaId}/0` });
  });

  it('charges the default, or nothing, for an answer without a whole number, and counts it', async () => {
    const gateway = await gatewayWith();
    await setTokens(gateway, tokens(100, { default: 7 }));
    for (const path of ['/pets/none', '/pets/many', '/pets/-3', '/pets/1.5', '/pets/1e3']) {
      expect((await get(gateway, undefined, path)).status).toBe(200);
    }
    await expect.poll(() => usedOf(gateway)).toBe(35);
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toContain('quotagate_units_unreadable_total{quota="System",restriction="0"} 5');

    // Units read from another field are another count: the restriction starts a counter of its own.
    await setTokens(gateway, tokens(100, { header: 'X-Other' }));
    expect(await usedOf(gateway)).toBe(0);
    expect((await get(gateway, undefined, '/pets/9')).status).toBe(200);
    expect((await get(gateway, undefined, '/pets/0')).status).toBe(200);
    // No default: nothing charged, and 0 is a whole number like any other. On Redis, a gateway holds the
    // unit its lease reserved for these two until the lease ends, and usage counts it (docs/quotas.md).
    const held = storeName === 'the Redis store' ? 1 : 0;
    expect(await usedOf(gateway)).toBeLessThanOrEqual(held);
  });
});

describe('throttleunits across a fleet on Redis', () => {
  it('counts one limit for the fleet from headers and trailers, over by at most what the last exchange charged', async () => {
    const upstream = await startUpstream(costingUpstream);
    defer(() => upstream.close());
    const [a, b] = await startFleetOfTwo(defer, { apis: petsConfig(`${upstream.url}/pets`).apis });
    await setTokens(a, tokens(10));
    await expect
      .poll(async () => (await get(b, undefined, '/pets/0')).headers['ratelimit-policy'])
      .toMatch(/qu="units"/);
    const statuses = [];
    // The cost comes in the header from a, in a trailer from b.
    for (const gateway of [a, b, a, b, a, b]) {
      statuses.push((await get(gateway, undefined, gateway === a ? '/pets/3' : '/pets/3?trailer')).status);
      // Each exchange has ended and been charged before the next one asks.
      await expect
        .poll(() => usedOf(a))
        .toBe(Math.min(12, 3 * statuses.filter((status) => status === 200).length));
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    expect(await usedOf(b)).toBe(12);
  });
});
