import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  eachStore,
  get,
  mobileId,
  mobileKey,
  startFleetOfTwo,
  useEnforcementGateways,
} from '../helpers/enforcement-gateways.js';
import {
  adminCall,
  adminUser,
  applicationDefaultQuotaId,
  memberUser,
  quotaUsage,
  setQuota,
  throttle,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';

const resetPath = (application: string) => `/applications/${application}/quota/reset`;

/** POST …/quota/reset as `user`, with `body` as it is sent (none: no body). */
const reset = (
  gateway: TestGateway,
  application: string,
  body?: string,
  user: { username: string; password: string } = adminUser,
) =>
  fetch(`${gateway.adminUrl}/api/portal/v1.3${resetPath(application)}`, {
    method: 'POST',
    headers: {
      authorization: userAuth(user),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body }),
  });

/** The statuses of `count` requests of the mobile application, one after the other. */
async function statuses(gateway: TestGateway, count: number): Promise<number[]> {
  const answers: number[] = [];
  for (let i = 0; i < count; i += 1) answers.push((await get(gateway, mobileKey)).status);
  return answers;
}

describe.each(eachStore)('resetting an application quota on %s', (_store, store) => {
  const { gatewayWith, clock } = useEnforcementGateways();

  it("gives the application the whole limit again, and leaves other applications' counts", async () => {
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(3, 1, 'hour')] },
      applicationDefaultQuotaId,
    );
    expect(await statuses(gateway, 4)).toEqual([200, 200, 200, 429]);
    const answer = await reset(gateway, mobileId);
    expect(answer.status, await answer.clone().text()).toBe(204);
    expect(await statuses(gateway, 4)).toEqual([200, 200, 200, 429]);
    const audit = gateway.logs.find((line) => line.audit === true && line.action === 'resetApplicationQuota');
    expect(audit).toMatchObject({
      actor: adminUser.username,
      outcome: 'success',
      status: 204,
      target: { application: mobileId, quota: applicationDefaultQuotaId },
    });
  });

  it('resets a calendar window to zero, and the next window starts at zero as always', async () => {
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      {
        type: 'APPLICATION',
        name: 'Application Default',
        restrictions: [
          throttle(2, 1, 'month', { config: { messages: 2, per: 1, period: 'month', window: 'calendar' } }),
        ],
      },
      applicationDefaultQuotaId,
    );
    expect(await statuses(gateway, 3)).toEqual([200, 200, 429]);
    expect((await reset(gateway, mobileId)).status).toBe(204);
    expect(await statuses(gateway, 3)).toEqual([200, 200, 429]);
    clock.now += 32 * 24 * 3_600_000;
    expect(await statuses(gateway, 3)).toEqual([200, 200, 429]);
  });

  it('resets only the restrictions named by index', async () => {
    const gateway = await gatewayWith(store());
    const made = await adminCall(gateway, 'PUT', `/applications/${mobileId}/quota`, {
      restrictions: [throttle(5, 1, 'hour'), throttle(3, 1, 'day')],
    });
    expect(made.status).toBe(201);
    expect(await statuses(gateway, 4)).toEqual([200, 200, 200, 429]);
    // The daily count (3 of 3) reset, the hourly one (3 of 5) lets 2 more through.
    expect((await reset(gateway, mobileId, '{"restrictions": [1]}')).status).toBe(204);
    expect(await statuses(gateway, 3)).toEqual([200, 200, 429]);
    // The hourly count (5 of 5) reset, the daily one (2 of 3) lets 1 more through.
    expect((await reset(gateway, mobileId, '{"restrictions": [0]}')).status).toBe(204);
    expect(await statuses(gateway, 2)).toEqual([200, 429]);
  });

  it('refuses a member, an unknown application, a restriction the quota lacks and a body that is no JSON', async () => {
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(3, 1, 'hour')] },
      applicationDefaultQuotaId,
    );
    expect((await reset(gateway, mobileId, undefined, memberUser)).status).toBe(403);
    expect((await reset(gateway, 'no-such-application')).status).toBe(404);
    const badIndex = await reset(gateway, mobileId, '{"restrictions": [0, 4]}');
    expect(badIndex.status).toBe(400);
    expect(JSON.stringify(await badIndex.json())).toContain('no restriction 4');
    expect((await reset(gateway, mobileId, '{"restrictions": [')).status).toBe(400);
    expect((await reset(gateway, mobileId, '{"restrictions": [-1]}')).status).toBe(400);
  });
});

describe('resetting an application quota on a fleet of two gateways on one Redis', () => {
  const defer = cleanupAfterEach();

  it("gives the application's next request on the other gateway the whole limit, leases or not: the fleet passes exactly the limit", async () => {
    const [a, b] = await startFleetOfTwo(defer);
    // Large enough for leases: a gateway leases at most its part of one sub-bucket's share of the limit.
    const limit = 600;
    await setQuota(
      a,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(limit, 1, 'hour')] },
      applicationDefaultQuotaId,
    );
    const onB = async () => {
      const res = await fetch(`${b.adminUrl}/api/portal/v1.3/quotas/${applicationDefaultQuotaId}`, {
        headers: { authorization: userAuth(adminUser) },
      });
      return ((await res.json()) as { restrictions: unknown[] }).restrictions.length;
    };
    await expect.poll(onB).toBe(1);
    // Both gateways spend: each takes leases of the shared counter.
    const before = [...(await statuses(a, 15)), ...(await statuses(b, 15))];
    expect(before.filter((status) => status === 200)).toHaveLength(30);
    // Redis holds more than the 30 admitted: the rest is leased to the gateways, which would spend it.
    const mobileIn = async (gateway: TestGateway) =>
      (await quotaUsage(gateway.adminUrl, applicationDefaultQuotaId)).restrictions[0]!.applications!.find(
        (entry) => entry.application === mobileId,
      )?.used ?? 0;
    expect(await mobileIn(b)).toBeGreaterThan(30);
    expect((await reset(a, mobileId)).status).toBe(204);
    // B learns of the reset as it learns of a quota change: its usage read then counts the fresh counter.
    await expect.poll(() => mobileIn(b)).toBe(0);
    expect((await get(b, mobileKey)).status).toBe(200);
    let passed = 1;
    let refused = 0;
    for (let i = 0; refused < 40 && i < 3 * limit; i += 1) {
      const status = (await get(i % 2 === 0 ? a : b, mobileKey)).status;
      expect([200, 429]).toContain(status);
      if (status === 200) passed += 1;
      else refused += 1;
    }
    // Never more than the limit; and all of it but what the gateways still hold leased when they are
    // refused (at most each one's part of a sub-bucket, 5 here, given back when it ends), as a fresh
    // counter of a fleet passes in a burst: before the reset over 30 were counted.
    expect(passed).toBeLessThanOrEqual(limit);
    expect(passed).toBeGreaterThanOrEqual(limit - 10);
  });
});
