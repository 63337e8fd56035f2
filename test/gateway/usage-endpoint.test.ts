import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  eachStore,
  get,
  mobileId,
  mobileKey,
  useEnforcementGateways,
  webId,
  webKey,
  startFleetOfTwo,
} from '../helpers/enforcement-gateways.js';
import { request } from '../helpers/raw-http.js';
import {
  adminCall,
  applicationDefaultQuotaId,
  basicAuth,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';

const { gatewayWith, clock } = useEnforcementGateways();
const defer = cleanupAfterEach();

interface Reading {
  quota: { id: string; name: string };
  index: number;
  api: string;
  method: string;
  mode: string;
  limit: number;
  used: number;
  remaining: number;
  windowSeconds: number;
  resetSeconds: number;
}
interface UsageBody {
  application: { id: string; name: string } | null;
  restrictions: Reading[];
}

const readUsage = async (gateway: TestGateway, key: string | null, path = '/_quotagate/usage') => {
  const answer = await request(gateway.url, {
    path,
    headers: key === null ? {} : { authorization: basicAuth(key) },
  });
  return { ...answer, json: () => JSON.parse(answer.body) as UsageBody };
};

/** System: 10 a minute for all; Application Default: 5 a minute each; web: 3 a minute of its own. */
async function quotasOf(gateway: TestGateway): Promise<void> {
  await setQuota(
    gateway,
    { type: 'API', name: 'System', restrictions: [throttle(10, 1, 'minute')] },
    systemQuotaId,
  );
  await setQuota(
    gateway,
    { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(5, 1, 'minute')] },
    applicationDefaultQuotaId,
  );
  const web = await adminCall(gateway, 'PUT', `/applications/${webId}/quota`, {
    name: 'Web',
    restrictions: [throttle(3, 1, 'minute')],
  });
  expect(web.status).toBe(201);
}

const usedOf = (body: UsageBody) => body.restrictions.map((reading) => [reading.quota.name, reading.used]);

describe.each(eachStore)('the usage path on %s', (_store, store) => {
  it("answers the caller's own restrictions with what each has counted, and never counts itself", async () => {
    const gateway = await gatewayWith(store());
    await quotasOf(gateway);
    expect([(await get(gateway, mobileKey)).status, (await get(gateway, mobileKey)).status]).toEqual([
      200, 200,
    ]);
    expect((await get(gateway, webKey)).status).toBe(200);

    for (let i = 0; i < 3; i += 1) {
      const answer = await readUsage(gateway, mobileKey);
      expect(answer.status).toBe(200);
      expect(answer.headers['cache-control']).toBe('no-store');
      const body = answer.json();
      expect(body.application).toEqual({ id: mobileId, name: 'Mobile' });
      // web's own quota is web's: not listed for mobile.
      expect(usedOf(body)).toEqual([
        ['System', 3],
        ['Application Default', 2],
      ]);
      expect(body.restrictions[1]).toEqual({
        quota: { id: applicationDefaultQuotaId, name: 'Application Default' },
        index: 0,
        api: '*',
        method: '*',
        type: 'throttle',
        mode: 'enforce',
        unit: 'messages',
        limit: 5,
        used: 2,
        remaining: 3,
        windowSeconds: 60,
        // The units stay counted until their 600 ms sub-bucket has left the minute: up to 60.6 s.
        resetSeconds: 61,
      });
      // The RateLimit fields are the tightest restriction's: 3 of 5 left beats 7 of 10.
      expect(answer.headers['ratelimit-policy']).toBe(`"${applicationDefaultQuotaId}/0";q=5;w=60`);
      expect(answer.headers.ratelimit).toBe(`"${applicationDefaultQuotaId}/0";r=3;t=61`);
    }
    expect(usedOf((await readUsage(gateway, webKey)).json())).toEqual([
      ['System', 3],
      ['Web', 1],
    ]);
    // Three more of mobile's requests fit its 5: the reads took none of them.
    const more = [
      await get(gateway, mobileKey),
      await get(gateway, mobileKey),
      await get(gateway, mobileKey),
    ];
    expect(more.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect((await get(gateway, mobileKey)).status).toBe(429);
  });

  it('refuses a caller without credentials as any request, and holds each caller to its read budget', async () => {
    const gateway = await gatewayWith(store());
    const anonymous = await readUsage(gateway, null);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toBeDefined();

    for (let i = 0; i < 10; i += 1) expect((await readUsage(gateway, mobileKey)).status).toBe(200);
    const over = await readUsage(gateway, mobileKey);
    expect(over.status).toBe(429);
    expect(over.headers['retry-after']).toBe('10');
    // Another caller has a budget of its own.
    expect((await readUsage(gateway, webKey)).status).toBe(200);
    clock.now += 10_000;
    expect((await readUsage(gateway, mobileKey)).status).toBe(200);
  });
});

describe('the usage path', () => {
  it('follows usagePath: another path, or none at all; GET and HEAD only', async () => {
    const moved = await gatewayWith({ usagePath: '/me/usage' });
    expect((await readUsage(moved, mobileKey, '/me/usage')).status).toBe(200);
    expect((await readUsage(moved, mobileKey)).status).toBe(404);
    const post = await request(moved.url, {
      method: 'POST',
      path: '/me/usage',
      headers: { authorization: basicAuth(mobileKey) },
    });
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
    const head = await request(moved.url, {
      method: 'HEAD',
      path: '/me/usage',
      headers: { authorization: basicAuth(mobileKey) },
    });
    expect(head.status).toBe(200);

    // A body it never reads is never taken for the next request: the connection closes.
    const withBody = await request(moved.url, {
      path: '/me/usage',
      headers: { authorization: basicAuth(mobileKey), 'content-length': '23' },
      body: 'GET /pets/1 HTTP/1.1\r\n\r\n',
    });
    expect(withBody.status).toBe(200);
    expect(withBody.headers.connection).toBe('close');

    const off = await gatewayWith({ usagePath: false });
    expect((await readUsage(off, mobileKey)).status).toBe(404);
  });

  it('is authenticated and read from the budget under every spelling that reaches it', async () => {
    const gateway = await gatewayWith({});
    const host = new URL(gateway.url).host;
    const spellings = [
      '/_quotagate/usage',
      '/_quotagate/./usage',
      '/pets/../_quotagate/usage',
      '/pets/%2e%2e/_quotagate/usage',
      '/_quotagate/%75sage',
      '//_quotagate/usage',
      '/_quotagate/usage/',
      '/_quotagate/usage?application=web',
      '/_QUOTAGATE/USAGE',
      `http://${host}/_quotagate/usage`,
    ];
    const reached: string[] = [];
    for (const path of spellings) {
      const anonymous = await readUsage(gateway, null, path);
      const known = await readUsage(gateway, mobileKey, path);
      // A spelling that reaches the usage path asks for credentials as the usage path does; one that
      // does not is no path of the gateway. None answers a caller without credentials.
      expect([anonymous.status, known.status], path).toEqual(known.status === 200 ? [401, 200] : [404, 404]);
      if (known.status === 200) {
        expect(known.json().application?.id, path).toBe(mobileId);
        reached.push(path);
      }
    }
    expect(reached).toEqual(
      expect.arrayContaining([
        '/_quotagate/usage',
        '/_quotagate/./usage',
        '/pets/../_quotagate/usage',
        '/pets/%2e%2e/_quotagate/usage',
        `http://${host}/_quotagate/usage`,
      ]),
    );
    // Every spelling that reached it was read from the same budget of ten reads a caller has.
    for (let i = reached.length; i < 10; i += 1)
      expect((await readUsage(gateway, mobileKey)).status).toBe(200);
    expect((await readUsage(gateway, mobileKey)).status).toBe(429);
  });

  it('refuses a usagePath that is a path of the catalog', async () => {
    const config = petsConfig('http://127.0.0.1:9/pets', { usagePath: '/pets/usage' });
    await expect(startTestGateway(config)).rejects.toThrow(
      "usagePath: '/pets/usage' is a path of API 'Pet Store' (GET, its method 'getPet'): choose another path, or false",
    );
  });
});

describe('the usage path across a fleet on Redis', () => {
  it("reads on one gateway what the caller's requests counted on the other", async () => {
    const [a, b] = await startFleetOfTwo(defer);
    await setQuota(
      a,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(4, 1, 'hour')] },
      applicationDefaultQuotaId,
    );
    await expect.poll(async () => (await readUsage(b, mobileKey)).json().restrictions.length).toBe(1);
    for (let i = 0; i < 3; i += 1) expect((await get(a, mobileKey)).status).toBe(200);
    const read = (await readUsage(b, mobileKey)).json().restrictions[0]!;
    expect([read.used, read.remaining]).toEqual([3, 1]);
    expect((await get(b, mobileKey)).status).toBe(200);
    expect((await get(a, mobileKey)).status).toBe(429);
  });
});
