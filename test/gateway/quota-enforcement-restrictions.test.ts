import { describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  adminUser,
  applicationDefaultQuotaId,
  basicAuth,
  devKey,
  getPetMethodId,
  petsApiId,
  setQuota,
  systemQuotaId,
  throttle,
  userAuth,
  accessLines,
} from '../helpers/test-gateway.js';
import {
  get,
  mobileId,
  mobileKey,
  tooMany,
  useEnforcementGateways,
  webKey,
} from '../helpers/enforcement-gateways.js';

const { clock, gatewayWith, upstream } = useEnforcementGateways();

describe('quota enforcement: which restrictions apply', () => {
  it('rejects with 429, the seed-style body, Retry-After and RateLimit headers once the System quota is spent', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'minute')] },
      systemQuotaId,
    );
    const before = upstream().requests.length;
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
    expect(upstream().requests.length - before).toBe(3);
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
      new RegExp(`^"${systemQuotaId}/1";r=1;t=\\d+, "${systemQuotaId}/0";r=99;t=2$`),
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
      expect(items).toContain(`"${systemQuotaId}/0";r=${2 - i};t=2`);
      expect(items).toContain(`"${systemQuotaId}/1";r=${4 - i};t=3636`);
    }
    const refused = await get(gateway);
    expect(refused.status).toBe(429);
    expect(refused.headers.ratelimit).toBe(`"${systemQuotaId}/0";r=0;t=2, "${systemQuotaId}/1";r=2;t=3636`);
    expect(refused.headers['ratelimit-policy']).toBe(
      `"${systemQuotaId}/0";q=3;w=1, "${systemQuotaId}/1";q=5;w=3600`,
    );
    // Retry-After is the short limit's, the one that refused, not the hour's, and its t says the same:
    // its units stay counted until their 10 ms sub-bucket has left the second, 1.005 s after they came,
    // which rounds up to 2 (the hour's, 36 s sub-buckets, 3,635.995 s: 3636).
    expect(refused.headers['retry-after']).toBe('2');
    // The access line of the 429 names the restriction that refused, as RateLimit does; a 200's, none.
    const lines = accessLines(gateway);
    expect(lines.at(-1)).toMatchObject({ status: 429, quota: 'rejected', refusedBy: `${systemQuotaId}/0` });
    expect(lines.at(-2)).toMatchObject({ status: 200, quota: 'allowed' });
    expect(lines.at(-2)).not.toHaveProperty('refusedBy');
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
