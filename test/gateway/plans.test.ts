import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  get,
  mobileId,
  mobileKey,
  useEnforcementGateways,
  webId,
  webKey,
  eachStore,
  startFleetOfTwo,
  putOnPlan,
} from '../helpers/enforcement-gateways.js';
import { quotaUsage, setQuota, throttle, type TestGateway } from '../helpers/test-gateway.js';

const { gatewayWith } = useEnforcementGateways();
const defer = cleanupAfterEach();

const gold = (messages: number) => ({
  type: 'APPLICATION',
  name: 'Gold',
  restrictions: [throttle(messages, 1, 'hour')],
});

const statuses = async (gateway: TestGateway, key: string, count: number) => {
  const answers: number[] = [];
  for (let i = 0; i < count; i += 1) answers.push((await get(gateway, key)).status);
  return answers;
};

describe.each(eachStore)('plans on %s', (_store, store) => {
  it("counts every application on a plan on its own, by the plan's restrictions, and follows a change of the plan", async () => {
    const gateway = await gatewayWith(store());
    const plan = await setQuota(gateway, gold(2));
    await putOnPlan(gateway, mobileId, plan);
    await putOnPlan(gateway, webId, plan);

    expect(await statuses(gateway, mobileKey, 3)).toEqual([200, 200, 429]);
    const web = await get(gateway, webKey);
    expect(web.status).toBe(200);
    expect(web.headers['ratelimit-policy']).toBe(`"${plan}/0";q=2;w=3600`);
    expect(web.headers.ratelimit).toMatch(new RegExp(`^"${plan}/0";r=1;t=\\d+$`));

    await setQuota(gateway, gold(3), plan);
    expect(await statuses(gateway, mobileKey, 2)).toEqual([200, 429]);
    expect(await statuses(gateway, webKey, 3)).toEqual([200, 200, 429]);

    const usage = await quotaUsage(gateway.adminUrl, plan);
    const byApplication = usage.restrictions[0]!.applications!.map((entry) => [entry.name, entry.used]);
    expect(byApplication.sort()).toEqual([
      ['Mobile', 3],
      ['Web', 3],
    ]);
  });
});

describe('plans across a fleet on Redis', () => {
  it('puts an application on a plan, and changes the plan, on both gateways within a second', async () => {
    const [a, b] = await startFleetOfTwo(defer);

    const plan = await setQuota(a, gold(1));
    await putOnPlan(a, mobileId, plan);
    // expect.poll gives up after a second: b must have the membership by then.
    await expect
      .poll(async () => (await get(b, mobileKey)).headers['ratelimit-policy'])
      .toBe(`"${plan}/0";q=1;w=3600`);
    expect((await get(a, mobileKey)).status).toBe(429);

    await setQuota(b, gold(5), plan);
    await expect
      .poll(async () => (await get(a, mobileKey)).headers['ratelimit-policy'])
      .toBe(`"${plan}/0";q=5;w=3600`);
    // One count for the fleet: a's and b's requests share the application's counter on the plan.
    const usage = await quotaUsage(a.adminUrl, plan);
    const used = usage.restrictions[0]!.applications!.find((entry) => entry.application === mobileId)!.used;
    const seen: number[] = [];
    for (let i = 0; i < 6; i += 1) seen.push((await get(i % 2 === 0 ? a : b, mobileKey)).status);
    expect(seen.filter((status) => status === 200)).toHaveLength(5 - used);
    expect(seen.at(-1)).toBe(429);
  });
});
