import http from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  adminUser,
  applicationDefaultQuotaId,
  basicAuth,
  devKey,
  getPetMethodId,
  mb,
  memberUser,
  petsApiId,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const mobileId = '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
const mobileKey = 'mobile-dev-key-0123456789abcdef0123';
const webId = '5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a';
const webKey = 'web-dev-key-0123456789abcdef01234567';
const applications = [
  { id: mobileId, name: 'Mobile', apikey_development: mobileKey },
  { id: webId, name: 'Web', apikey_development: webKey },
];
const tooMany = '{"id":"com.vendor.api.quota_exceeded","message":"Too Many Requests","success":false}';

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(() => upstream.close());

const clock = { now: 1_800_000_000_000 };
const gateways: TestGateway[] = [];
afterEach(async () => {
  for (const gateway of gateways.splice(0)) await gateway.close();
});

async function gatewayWith(overrides: Record<string, unknown> = {}): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig(upstream.url, { applications, ...overrides }),
    {},
    { clock: () => clock.now },
  );
  gateways.push(gateway);
  return gateway;
}

const get = (gateway: TestGateway, key = devKey, path = '/pets/1') =>
  request(gateway.url, { path, headers: { authorization: basicAuth(key) } });

describe('quota enforcement: which restrictions apply', () => {
  it('rejects with 429, the seed-style body, Retry-After and RateLimit headers once the System quota is spent', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'minute')] },
      systemQuotaId,
    );
    const before = upstream.requests.length;
    for (let i = 0; i < 3; i += 1) {
      const ok = await get(gateway);
      expect(ok.status).toBe(200);
      expect(ok.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/0";q=3;w=60`);
      expect(ok.headers.ratelimit).toMatch(new RegExp(`^"${systemQuotaId}/0";r=${2 - i};t=\\d+$`));
    }
    const rejected = await get(gateway);
    expect(rejected.status).toBe(429);
    expect(rejected.body).toBe(tooMany);
    expect(rejected.headers['content-type']).toBe('application/json');
    expect(Number(rejected.headers['retry-after'])).toBeGreaterThanOrEqual(60);
    expect(Number(rejected.headers['retry-after'])).toBeLessThanOrEqual(61);
    expect(rejected.headers.ratelimit).toMatch(/;r=0;t=\d+$/);
    expect(upstream.requests.length - before).toBe(3);
  });

  it('counts the System quota across applications, and the Application Default per application', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(5, 1, 'minute')] },
      systemQuotaId,
    );
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Default', restrictions: [throttle(2, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    const statuses = [];
    for (const key of [mobileKey, mobileKey, mobileKey, webKey, webKey, webKey, devKey])
      statuses.push((await get(gateway, key)).status);
    // Each application gets 2 (its own Default counter); the third of each is refused; the System
    // quota has counted 5 admitted requests, so the project's request is refused by it.
    expect(statuses).toEqual([200, 200, 429, 200, 200, 429, 200]);
    expect((await get(gateway, devKey)).status).toBe(429);
  });

  it("applies an application's own quota instead of the Application Default", async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Default', restrictions: [throttle(1, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/applications/${mobileId}/quota`, {
      method: 'POST',
      headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'APPLICATION', name: 'Mobile', restrictions: [throttle(3, 1, 'minute')] }),
    });
    expect(res.status).toBe(201);
    const mobile = [];
    for (let i = 0; i < 4; i += 1) mobile.push((await get(gateway, mobileKey)).status);
    expect(mobile).toEqual([200, 200, 200, 429]);
    expect([(await get(gateway, webKey)).status, (await get(gateway, webKey)).status]).toEqual([200, 429]);
  });

  it('applies only API-type quotas without an application (none scheme)', async () => {
    const gateway = await gatewayWith({ APIKeyAuthType: 'none' });
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Default', restrictions: [throttle(1, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'minute')] },
      systemQuotaId,
    );
    const statuses = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await request(gateway.url, { path: '/pets/1' })).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
  });

  it('matches restrictions by API, method and verb', async () => {
    const gateway = await gatewayWith();
    await setQuota(gateway, {
      type: 'API',
      name: 'Per method',
      restrictions: [
        throttle(1, 1, 'minute', { api: petsApiId, method: getPetMethodId }),
        throttle(1, 1, 'minute', { api: petsApiId, method: '*', verb: 'POST' }),
      ],
    });
    expect([(await get(gateway)).status, (await get(gateway)).status]).toEqual([200, 429]);
    // Another method of the API (listPets) is not getPet; a path no method declares is not exposed.
    expect((await get(gateway, devKey, '/pets')).status).toBe(200);
    expect((await get(gateway, devKey, '/pets/1/owners')).status).toBe(404);
    // HEAD is routed and counted as GET.
    expect(
      (
        await request(gateway.url, {
          method: 'HEAD',
          path: '/pets/2',
          headers: { authorization: basicAuth(devKey) },
        })
      ).status,
    ).toBe(429);
    const post = () =>
      request(gateway.url, {
        method: 'POST',
        path: '/pets',
        headers: { authorization: basicAuth(devKey) },
        body: '{}',
      });
    expect([(await post()).status, (await post()).status]).toEqual([200, 429]);
  });

  it('checks every matching restriction, and the RateLimit fields carry one item for each, the closest to its limit first', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(100, 1, 'second'), throttle(2, 1, 'day')] },
      systemQuotaId,
    );
    const first = await get(gateway);
    expect(first.headers['ratelimit-policy']).toBe(
      `"${systemQuotaId}/1";q=2;w=86400, "${systemQuotaId}/0";q=100;w=1`,
    );
    expect(first.headers.ratelimit).toMatch(
      new RegExp(`^"${systemQuotaId}/1";r=1;t=\\d+, "${systemQuotaId}/0";r=99;t=1$`),
    );
    expect((await get(gateway)).status).toBe(200);
    expect((await get(gateway)).status).toBe(429);
  });

  it('shows every limit at once: the 429 of the short one still says what the long one has left (Kong\'s "two limits")', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'second'), throttle(5, 1, 'hour')] },
      systemQuotaId,
    );
    clock.now = Math.ceil(clock.now / 3_600_000) * 3_600_000 + 5;
    for (let i = 0; i < 3; i += 1) {
      const ok = await get(gateway);
      expect(ok.status).toBe(200);
      const items = String(ok.headers.ratelimit).split(', ');
      expect(items).toHaveLength(2);
      expect(items).toContain(`"${systemQuotaId}/0";r=${2 - i};t=1`);
      expect(items).toContain(`"${systemQuotaId}/1";r=${4 - i};t=3600`);
    }
    const refused = await get(gateway);
    expect(refused.status).toBe(429);
    expect(refused.headers.ratelimit).toBe(`"${systemQuotaId}/0";r=0;t=1, "${systemQuotaId}/1";r=2;t=3600`);
    expect(refused.headers['ratelimit-policy']).toBe(
      `"${systemQuotaId}/0";q=3;w=1, "${systemQuotaId}/1";q=5;w=3600`,
    );
    // Retry-After is the short limit's, the one that refused, not the hour's: its units stay counted
    // until their 10 ms sub-bucket has left the second, 1.005 s after they came, which rounds up to 2.
    expect(refused.headers['retry-after']).toBe('2');
    // The access line of the 429 names the restriction that refused, as RateLimit does; a 200's, none.
    const lines = gateway.logs.filter((line) => line.msg === 'request');
    expect(lines.at(-1)).toMatchObject({ status: 429, quota: 'rejected', refusedBy: `${systemQuotaId}/0` });
    expect(lines.at(-2)).toMatchObject({ status: 200, quota: 'allowed' });
    expect(lines.at(-2)).not.toHaveProperty('refusedBy');
  });

  it('never says t beyond w, though a counter keeps its oldest units up to a sub-bucket past the window', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(5, 20, 'seconds')] },
      systemQuotaId,
    );
    // 1 ms into a 200 ms sub-bucket: the units stay counted 20.199 s, which rounded up is 21.
    clock.now = Math.ceil(clock.now / 200) * 200 + 1;
    const first = await get(gateway);
    expect(first.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/0";q=5;w=20`);
    expect(first.headers.ratelimit).toBe(`"${systemQuotaId}/0";r=4;t=20`);
  });

  it('sends at most 10 items a field, leaving out those with the most room left', async () => {
    const gateway = await gatewayWith();
    // Twelve restrictions; the last two have the most room (relative to their limits) and are left out.
    const limits = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1000, 2000];
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: limits.map((limit) => throttle(limit, 1, 'hour')) },
      systemQuotaId,
    );
    const answer = await get(gateway);
    expect(answer.status).toBe(200);
    const names = (field: string) => field.split(', ').map((item) => item.slice(0, item.indexOf(';')));
    const kept = limits.slice(0, 10).map((_, index) => `"${systemQuotaId}/${index}"`);
    expect(names(String(answer.headers['ratelimit-policy']))).toEqual(kept);
    expect(names(String(answer.headers.ratelimit))).toEqual(kept);
  });

  it('takes quota changes into account at once, without a restart', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(1, 1, 'minute')] },
      systemQuotaId,
    );
    expect([(await get(gateway)).status, (await get(gateway)).status]).toEqual([200, 429]);
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(5, 1, 'minute')] },
      systemQuotaId,
    );
    expect((await get(gateway)).status).toBe(200);
    await setQuota(gateway, { type: 'API', name: 'System', restrictions: [] }, systemQuotaId);
    expect((await get(gateway)).headers['ratelimit-policy']).toBeUndefined();
  });
});

describe('quota enforcement: sliding windows on the gateway clock', () => {
  it('gives a client over its limit steady service at the limit, not a lockout', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(10, 10, 'seconds')] },
      systemQuotaId,
    );
    let admitted = 0;
    const start = clock.now;
    // 5 attempts every second for 60 s: 300 attempts at a limit of 10 per 10 s.
    for (let t = 0; t < 60_000; t += 1000) {
      clock.now = start + t;
      for (let i = 0; i < 5; i += 1) if ((await get(gateway)).status === 200) admitted += 1;
    }
    expect(admitted).toBeGreaterThanOrEqual(55);
    expect(admitted).toBeLessThanOrEqual(60);
  });
});

describe('quota enforcement: throttlemb', () => {
  it('rejects up front a declared body larger than what is left, before the upstream sees it', async () => {
    const gateway = await gatewayWith();
    // 0.01 MB = 10,485 bytes: after a first body of 6,000, a second of 5,000 does not fit (and would alone).
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.01, 1, 'minute')] },
      systemQuotaId,
    );
    const post = (bytes: number) =>
      request(gateway.url, {
        method: 'POST',
        path: '/pets',
        headers: { authorization: basicAuth(devKey), 'content-length': String(bytes) },
        body: 'x'.repeat(bytes),
      });
    expect((await post(6000)).status).toBe(200);
    const before = upstream.requests.length;
    const res = await post(5000);
    expect(res.status).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(upstream.requests.length).toBe(before);
  });

  it('answers 413 to a declared body that no window of the restriction could hold, and closes', async () => {
    const gateway = await gatewayWith();
    // 0.001 MB = 1,048 bytes a minute: 2,000 bytes would never fit, so no Retry-After could help.
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.001, 1, 'minute')] },
      systemQuotaId,
    );
    const before = upstream.requests.length;
    const res = await request(gateway.url, {
      method: 'POST',
      path: '/pets',
      headers: { authorization: basicAuth(devKey), 'content-length': '2000' },
      body: 'x'.repeat(2000),
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({
      id: 'com.vendor.api.payload_too_large',
      message: 'Payload Too Large',
      success: false,
    });
    expect(res.headers['retry-after']).toBeUndefined();
    expect(res.headers.connection).toBe('close');
    expect(upstream.requests.length).toBe(before);
    // Nothing was charged: a body that fits still goes through.
    expect((await get(gateway)).status).toBe(200);
  });

  it('counts chunked request bodies and response bodies from the streams, after the exchange', async () => {
    const gateway = await gatewayWith();
    // 0.01 MB = 10,485 bytes.
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.01, 1, 'minute')] },
      systemQuotaId,
    );
    const chunked = () =>
      new Promise<number>((resolve, reject) => {
        const req = http.request(
          `${gateway.url}/pets`,
          { method: 'POST', headers: { authorization: basicAuth(devKey) } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.write('y'.repeat(3000));
        setImmediate(() => req.end('y'.repeat(3000)));
      });
    expect(await chunked()).toBe(200);
    const usage = (await (
      await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas/${systemQuotaId}/usage`, {
        headers: { authorization: userAuth(adminUser) },
      })
    ).json()) as { restrictions: Array<{ used: number; unit: string; limit: number }> };
    // 6000 request bytes plus the echo of them (the upstream answers with the request as JSON).
    expect(usage.restrictions[0]).toMatchObject({ unit: 'bytes', limit: 10_485 });
    expect(usage.restrictions[0]!.used).toBeGreaterThan(12_000);
    expect(await chunked()).toBe(429);
  });
});

describe('quota enforcement: usage and metrics', () => {
  it('reports usage per restriction, and per application for application quotas', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Default', restrictions: [throttle(10, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    await get(gateway, mobileKey);
    await get(gateway, mobileKey);
    await get(gateway, webKey);
    const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas/${applicationDefaultQuotaId}/usage`, {
      headers: { authorization: userAuth(adminUser) },
    });
    expect(await res.json()).toEqual({
      quota: applicationDefaultQuotaId,
      restrictions: [
        {
          index: 0,
          type: 'throttle',
          unit: 'messages',
          limit: 10,
          windowSeconds: 60,
          // The oldest units leave when their sub-bucket does: 101 of 600 ms after it began.
          applications: [
            { application: mobileId, name: 'Mobile', used: 2, resetSeconds: 61 },
            { application: webId, name: 'Web', used: 1, resetSeconds: 61 },
          ].sort((a, b) => a.application.localeCompare(b.application)),
          rejections: { bucketSeconds: 10, counts: new Array(30).fill(0) },
        },
      ],
    });
  });

  it('lets a portal member read the usage of any quota but the System quota', async () => {
    const gateway = await gatewayWith();
    const usageOf = (id: string) =>
      fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas/${id}/usage`, {
        headers: { authorization: userAuth(memberUser) },
      });
    expect((await usageOf(applicationDefaultQuotaId)).status).toBe(200);
    expect((await usageOf(systemQuotaId)).status).toBe(403);
    expect((await usageOf(systemQuotaId.toUpperCase())).status).toBe(403);
  });

  it('counts allowed and rejected requests per quota and restriction in /metrics', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(1, 1, 'minute')] },
      systemQuotaId,
    );
    // At the start of a ten-second bucket of the rejection history.
    clock.now = Math.ceil(clock.now / 10_000) * 10_000;
    await get(gateway);
    await get(gateway);
    await get(gateway);
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toContain(
      'quotagate_quota_decisions_total{quota="System",restriction="0",decision="allowed"} 1',
    );
    expect(metrics).toContain(
      'quotagate_quota_decisions_total{quota="System",restriction="0",decision="rejected"} 2',
    );
    // The console's sparkline: the two rejections in the last ten-second bucket, 25 s later in the
    // third-last, and gone once five minutes have passed.
    const rejections = async () => {
      const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas/${systemQuotaId}/usage`, {
        headers: { authorization: userAuth(adminUser) },
      });
      return ((await res.json()) as { restrictions: Array<{ rejections: { counts: number[] } }> })
        .restrictions[0]!.rejections.counts;
    };
    expect((await rejections()).slice(-3)).toEqual([0, 0, 2]);
    clock.now += 25_000;
    expect((await rejections()).slice(-3)).toEqual([2, 0, 0]);
    clock.now += 300_000;
    expect((await rejections()).every((count) => count === 0)).toBe(true);
  });
});

describe.each([
  ['the memory store', () => ({})],
  [
    'the Redis store',
    () => ({
      store: { type: 'redis', url: inject('redisUrl'), prefix: `test:${Date.now()}:${Math.random()}:` },
    }),
  ],
])('the RateLimit fields on %s', (_store, store) => {
  it("say t within w on every answer, and on every refusal the refusing restriction's t is the Retry-After", async () => {
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'minute')] },
      systemQuotaId,
    );
    // Into a sub-bucket of 600 ms, as a client would be: the window's oldest units leave up to 60.6 s on.
    clock.now = Math.ceil(clock.now / 600) * 600 + 17;
    const answers: Array<Awaited<ReturnType<typeof get>>> = [];
    for (let i = 0; i < 8; i += 1) {
      answers.push(await get(gateway));
      clock.now += 1_000;
    }
    const item = (answer: (typeof answers)[number]) => {
      const [, r, t] = /;r=(\d+);t=(\d+)$/.exec(String(answer.headers.ratelimit))!;
      return { r: Number(r), t: Number(t) };
    };
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 429, 429, 429, 429, 429]);
    for (const answer of answers) expect(item(answer).t).toBeLessThanOrEqual(60);
    for (const refused of answers.filter((answer) => answer.status === 429)) {
      expect(item(refused)).toEqual({ r: 0, t: Number(refused.headers['retry-after']) });
    }
    // The first units leave about 60 s after they came: 57, 56, … seconds after the fourth request.
    expect(answers.slice(3).map((answer) => Number(answer.headers['retry-after']))).toEqual([
      58, 57, 56, 55, 54,
    ]);
  });
});

describe('quota enforcement on the Redis store', () => {
  it('enforces the same limits with counters in Redis', async () => {
    const gateway = await gatewayWith({
      store: { type: 'redis', url: inject('redisUrl'), prefix: `test:${Date.now()}:${Math.random()}:` },
    });
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(2, 1, 'minute')] },
      systemQuotaId,
    );
    const statuses = [];
    for (let i = 0; i < 3; i += 1) statuses.push((await get(gateway)).status);
    expect(statuses).toEqual([200, 200, 429]);
  });
});
