import { describe, expect, it } from 'vitest';
import {
  eachStore,
  get,
  mobileId,
  mobileKey,
  post,
  putOnPlan,
  useEnforcementGateways,
  webId,
  webKey,
} from '../helpers/enforcement-gateways.js';
import {
  devKey,
  getPetMethodId,
  mb,
  petsApiId,
  quotaUsage,
  setQuota,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import {
  applicationCounterKey,
  applicationOfCounter,
  callerCounterBase,
  generationOfCounter,
} from '../../src/quota/restriction-counters.js';

/**
 * A restriction's counter belongs to what it counts (its quota, api, method, verb, type and window), not
 * to its place in the quota: through real requests, on both stores, for an API quota and for a plan.
 */

const { gatewayWith } = useEnforcementGateways();

const onGetPet = { api: petsApiId, method: getPetMethodId };
/** The restriction whose count each test follows: getPet, 3 an hour. */
const threeAnHour = throttle(3, 1, 'hour', onGetPet);
/** A twin of it: it counts the same thing, under another limit. */
const tenAnHour = throttle(10, 1, 'hour', onGetPet);
/** A restriction that counts something else: every method, 20 a minute. */
const twentyAMinute = throttle(20, 1, 'minute');

const statuses = async (gateway: TestGateway, key: string, count: number, path?: string) => {
  const answers: number[] = [];
  for (let i = 0; i < count; i += 1) answers.push((await get(gateway, key, path)).status);
  return answers;
};
const system = (gateway: TestGateway, restrictions: unknown[]) =>
  setQuota(gateway, { type: 'API', name: 'System', restrictions }, systemQuotaId);
const usedOfSystem = async (gateway: TestGateway) =>
  (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions.map((restriction) => restriction.used);

describe.each(eachStore)('the counters of an API quota on %s', (_store, store) => {
  it('keep every count when a restriction is inserted before another, the order changes, or the first is removed', async () => {
    const gateway = await gatewayWith(store());
    await system(gateway, [threeAnHour]);
    expect(await statuses(gateway, devKey, 4)).toEqual([200, 200, 200, 429]);

    await system(gateway, [twentyAMinute, threeAnHour]);
    expect(await statuses(gateway, devKey, 1)).toEqual([429]);
    expect(await statuses(gateway, devKey, 2, '/pets')).toEqual([200, 200]);
    expect(await usedOfSystem(gateway)).toEqual([2, 3]);

    await system(gateway, [threeAnHour, twentyAMinute]);
    expect(await statuses(gateway, devKey, 1)).toEqual([429]);
    expect(await usedOfSystem(gateway)).toEqual([3, 2]);

    await system(gateway, [twentyAMinute]);
    expect(await usedOfSystem(gateway)).toEqual([2]);
    expect(await statuses(gateway, devKey, 1)).toEqual([200]);
  });

  it('share one count between twins that count the same thing: inserted or removed, neither restarts it', async () => {
    const gateway = await gatewayWith(store());
    await system(gateway, [threeAnHour]);
    expect(await statuses(gateway, devKey, 4)).toEqual([200, 200, 200, 429]);

    await system(gateway, [tenAnHour, threeAnHour]);
    const refused = await get(gateway);
    expect(refused.status).toBe(429);
    // Each twin says what is left under its own limit, of the one count.
    expect(refused.headers.ratelimit).toMatch(
      new RegExp(`^"${systemQuotaId}/1";r=0;t=\\d+, "${systemQuotaId}/0";r=7;t=\\d+$`),
    );
    expect(await usedOfSystem(gateway)).toEqual([3, 3]);

    await system(gateway, [tenAnHour]);
    expect(await statuses(gateway, devKey, 8)).toEqual([200, 200, 200, 200, 200, 200, 200, 429]);
    await system(gateway, [threeAnHour, tenAnHour]);
    expect(await usedOfSystem(gateway)).toEqual([10, 10]);
  });

  it('charge twins once for a request: one message, and the bytes of the exchange once', async () => {
    const gateway = await gatewayWith(store());
    await system(gateway, [threeAnHour, tenAnHour]);
    expect(await statuses(gateway, devKey, 1)).toEqual([200]);
    expect(await usedOfSystem(gateway)).toEqual([1, 1]);

    // The hour's restriction is no twin of the minute's: it shows what one charge of the exchange is.
    await system(gateway, [mb(1, 1, 'minute'), mb(2, 1, 'minute'), mb(1, 1, 'hour')]);
    expect((await post(gateway, 100)).status).toBe(200);
    await expect.poll(async () => (await usedOfSystem(gateway))[2]).toBeGreaterThan(100);
    const [minute, twin, hour] = await usedOfSystem(gateway);
    expect([minute, twin]).toEqual([hour, hour]);
  });

  it('keeps a shadow twin on a count of its own, wherever it stands, and the enforced count when it goes', async () => {
    const gateway = await gatewayWith(store());
    const fiveAMinute = throttle(5, 1, 'minute');
    const twoAMinuteShadow = { ...throttle(2, 1, 'minute'), mode: 'shadow' };
    await system(gateway, [fiveAMinute, twoAMinuteShadow]);
    expect(await statuses(gateway, devKey, 4)).toEqual([200, 200, 200, 200]);
    expect(await usedOfSystem(gateway)).toEqual([4, 2]);

    await system(gateway, [twoAMinuteShadow, fiveAMinute]);
    expect(await usedOfSystem(gateway)).toEqual([2, 4]);

    await system(gateway, [fiveAMinute]);
    expect(await statuses(gateway, devKey, 2)).toEqual([200, 429]);
  });

  it('keeps the count through a change of limit or of how the window is spelled, and starts afresh for another window or scope', async () => {
    const gateway = await gatewayWith(store());
    await system(gateway, [threeAnHour]);
    expect(await statuses(gateway, devKey, 4)).toEqual([200, 200, 200, 429]);

    await system(gateway, [throttle(4, 1, 'hour', onGetPet)]);
    expect(await statuses(gateway, devKey, 2)).toEqual([200, 429]);
    await system(gateway, [throttle(4, 60, 'minutes', onGetPet)]);
    expect(await statuses(gateway, devKey, 1)).toEqual([429]);

    await system(gateway, [throttle(4, 2, 'hours', onGetPet)]);
    expect(await statuses(gateway, devKey, 5)).toEqual([200, 200, 200, 200, 429]);
    await system(gateway, [throttle(4, 2, 'hours', { ...onGetPet, verb: 'GET' })]);
    expect(await statuses(gateway, devKey, 1)).toEqual([200]);
  });
});

describe.each(eachStore)('the counters of a plan on %s', (_store, store) => {
  const gold = (restrictions: unknown[]) => ({ type: 'APPLICATION', name: 'Gold', restrictions });
  const usedOf = async (gateway: TestGateway, plan: string) =>
    (await quotaUsage(gateway.adminUrl, plan)).restrictions.map((restriction) =>
      Object.fromEntries((restriction.applications ?? []).map((entry) => [entry.name, entry.used])),
    );

  it('keep what each application on it has counted when restrictions are inserted, reordered or removed', async () => {
    const gateway = await gatewayWith(store());
    const plan = await setQuota(gateway, gold([threeAnHour]));
    await putOnPlan(gateway, mobileId, plan);
    await putOnPlan(gateway, webId, plan);
    expect(await statuses(gateway, mobileKey, 4)).toEqual([200, 200, 200, 429]);
    expect(await statuses(gateway, webKey, 1)).toEqual([200]);

    await setQuota(gateway, gold([twentyAMinute, threeAnHour]), plan);
    expect(await statuses(gateway, mobileKey, 1)).toEqual([429]);
    expect(await statuses(gateway, webKey, 3)).toEqual([200, 200, 429]);
    expect(await statuses(gateway, mobileKey, 1, '/pets')).toEqual([200]);

    await setQuota(gateway, gold([threeAnHour, tenAnHour, twentyAMinute]), plan);
    expect(await statuses(gateway, mobileKey, 1)).toEqual([429]);
    expect(await statuses(gateway, webKey, 1)).toEqual([429]);
    expect(await usedOf(gateway, plan)).toEqual([
      { Mobile: 3, Web: 3 },
      { Mobile: 3, Web: 3 },
      { Mobile: 1, Web: 2 },
    ]);

    await setQuota(gateway, gold([twentyAMinute]), plan);
    expect(await usedOf(gateway, plan)).toEqual([{ Mobile: 1, Web: 2 }]);
    await setQuota(gateway, gold([tenAnHour]), plan);
    expect(await statuses(gateway, mobileKey, 8)).toEqual([200, 200, 200, 200, 200, 200, 200, 429]);
  });
});

describe('the reset generation in an application counter key', () => {
  it('marks every generation but 0, and reads back the application and the generation', () => {
    const base = 'q:0:abc:app:';
    const plain = applicationCounterKey(base, '#7:odd{app}');
    expect(plain).toBe(`${base}${/\{app:[0-9a-f]{16}\}/.exec(plain)![0]}:#7:odd{app}`);
    expect(applicationOfCounter(plain.slice(base.length))).toBe('#7:odd{app}');
    expect(generationOfCounter(plain.slice(base.length))).toBe(0);
    const reset = applicationCounterKey(base, '#7:odd{app}', 12);
    expect(reset).not.toBe(plain);
    expect(applicationOfCounter(reset.slice(base.length))).toBe('#7:odd{app}');
    expect(generationOfCounter(reset.slice(base.length))).toBe(12);
    expect(callerCounterBase(base, 0)).toBe(base);
    expect(generationOfCounter(callerCounterBase(base, 3).slice(base.length) + '{by:0123}')).toBe(3);
  });
});
