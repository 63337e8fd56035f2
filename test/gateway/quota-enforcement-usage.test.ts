import { describe, expect, inject, it } from 'vitest';
import {
  adminUser,
  applicationDefaultQuotaId,
  memberUser,
  setQuota,
  systemQuotaId,
  throttle,
  userAuth,
} from '../helpers/test-gateway.js';
import {
  get,
  mobileId,
  mobileKey,
  useEnforcementGateways,
  webId,
  webKey,
} from '../helpers/enforcement-gateways.js';

const { clock, gatewayWith } = useEnforcementGateways();

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
