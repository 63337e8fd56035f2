import { describe, expect, it, onTestFinished } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  applicationDefaultQuotaId,
  basicAuth,
  devKey,
  quotaUsage,
  setQuota,
  systemQuotaId,
  throttle,
} from '../helpers/test-gateway.js';
import {
  eachStore,
  get,
  setSystemQuotaOnFleet,
  startFleetOfTwo,
  useEnforcementGateways,
} from '../helpers/enforcement-gateways.js';

const { clock, gatewayWith } = useEnforcementGateways();

const at = (iso: string): number => Date.parse(iso);
const calendar = (messages: number, period: string, extra: Record<string, unknown> = {}) => {
  const restriction = throttle(messages, 1, period);
  return { ...restriction, config: { ...restriction.config, window: 'calendar', ...extra } };
};

/** Statuses of `count` GETs through `gateway`, and the last answer's RateLimit fields and Retry-After. */
async function attempts(gateway: Parameters<typeof get>[0], count: number) {
  const statuses: number[] = [];
  let last: Awaited<ReturnType<typeof get>> | undefined;
  for (let i = 0; i < count; i += 1) {
    last = await get(gateway);
    statuses.push(last.status);
  }
  return { statuses, headers: last!.headers };
}

const admittedThenRefused = (limit: number, refused = 1) => [
  ...Array<number>(limit).fill(200),
  ...Array<number>(refused).fill(429),
];

describe.each(eachStore)('calendar windows through a gateway, on %s', (_name, store) => {
  it('admits the limit of a month and not one more, says its end, and the whole limit again at its start', async () => {
    clock.now = at('2026-11-30T23:59:30Z');
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [calendar(3, 'month')] },
      systemQuotaId,
    );
    const november = await attempts(gateway, 4);
    expect(november.statuses).toEqual(admittedThenRefused(3));
    expect(november.headers['retry-after']).toBe('30');
    expect(november.headers.ratelimit).toBe(`"${systemQuotaId}/0";r=0;t=30`);
    expect(november.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/0";q=3;w=${30 * 86_400}`);
    // The admin usage reads the current window: 3 used, its end in 30 s, a window of 30 days.
    expect((await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]).toMatchObject({
      used: 3,
      resetSeconds: 30,
      windowSeconds: 30 * 86_400,
    });
    clock.now = at('2026-12-01T00:00:00Z') - 1;
    expect((await get(gateway)).status).toBe(429);
    clock.now += 1;
    expect((await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]).toMatchObject({
      used: 0,
      windowSeconds: 31 * 86_400,
    });
    const december = await attempts(gateway, 4);
    expect(december.statuses).toEqual(admittedThenRefused(3));
    expect(december.headers['retry-after']).toBe(String(31 * 86_400));
    expect(december.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/0";q=3;w=${31 * 86_400}`);
  });

  it("counts each application's calendar week apart, and its usage lists this week's counts only", async () => {
    // 2026-11-29 is a Sunday: the ISO week ends at midnight.
    clock.now = at('2026-11-29T23:00:00Z');
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [calendar(2, 'week')] },
      applicationDefaultQuotaId,
    );
    expect((await attempts(gateway, 3)).statuses).toEqual(admittedThenRefused(2));
    const lastWeek = (await quotaUsage(gateway.adminUrl, applicationDefaultQuotaId)).restrictions[0]!;
    expect(lastWeek.applications).toEqual([expect.objectContaining({ used: 2, resetSeconds: 3600 })]);
    clock.now = at('2026-11-30T00:00:00Z');
    expect(
      (await quotaUsage(gateway.adminUrl, applicationDefaultQuotaId)).restrictions[0]!.applications,
    ).toEqual([]);
    expect((await attempts(gateway, 1)).statuses).toEqual([200]);
    const thisWeek = (await quotaUsage(gateway.adminUrl, applicationDefaultQuotaId)).restrictions[0]!;
    expect(thisWeek.applications).toEqual([
      expect.objectContaining({
        application: lastWeek.applications![0]!.application,
        used: 1,
        resetSeconds: 7 * 86_400,
      }),
    ]);
  });

  it('counts a leap day, and from the billing day of the 28th through February 29', async () => {
    clock.now = at('2028-02-29T23:00:00Z');
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      {
        type: 'API',
        name: 'System',
        restrictions: [calendar(2, 'day'), calendar(5, 'month', { startDay: 28 })],
      },
      systemQuotaId,
    );
    expect((await attempts(gateway, 3)).statuses).toEqual(admittedThenRefused(2));
    clock.now = at('2028-03-01T00:00:00Z');
    const march = await attempts(gateway, 3);
    expect(march.statuses).toEqual(admittedThenRefused(2));
    // The month from the 28th holds 5, of which 4 are taken: one is left until March 28.
    expect(march.headers.ratelimit).toBe(
      `"${systemQuotaId}/0";r=0;t=86400, "${systemQuotaId}/1";r=1;t=${27 * 86_400}`,
    );
    clock.now = at('2028-03-02T00:00:00Z');
    const full = await attempts(gateway, 2);
    expect(full.statuses).toEqual(admittedThenRefused(1));
    expect(full.headers['retry-after']).toBe(String(26 * 86_400));
    clock.now = at('2028-03-28T00:00:00Z');
    expect((await attempts(gateway, 3)).statuses).toEqual(admittedThenRefused(2));
  });

  it("resets at its time zone's midnight, and a daylight-saving day lasts 25 hours", async () => {
    // New York falls back on 2026-11-01: its day runs from 04:00 UTC to 05:00 UTC the next day.
    clock.now = at('2026-11-01T04:00:00Z');
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [calendar(2, 'day', { timeZone: 'America/New_York' })] },
      systemQuotaId,
    );
    const first = await attempts(gateway, 3);
    expect(first.statuses).toEqual(admittedThenRefused(2));
    expect(first.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/0";q=2;w=${25 * 3600}`);
    expect(first.headers['retry-after']).toBe(String(25 * 3600));
    // The caller's own usage says the same window: 25 hours, its end in 25 hours.
    const own = await request(gateway.url, {
      path: '/_quotagate/usage',
      headers: { authorization: basicAuth(devKey) },
    });
    expect(JSON.parse(own.body).restrictions[0]).toMatchObject({
      used: 2,
      remaining: 0,
      windowSeconds: 25 * 3600,
      resetSeconds: 25 * 3600,
    });
    clock.now = at('2026-11-02T04:59:59Z');
    expect((await attempts(gateway, 1)).headers['retry-after']).toBe('1');
    clock.now = at('2026-11-02T05:00:00Z');
    const next = await attempts(gateway, 3);
    expect(next.statuses).toEqual(admittedThenRefused(2));
    expect(next.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/0";q=2;w=86400`);
  });
});

describe('a calendar window on a fleet of 2 gateways on one Redis', () => {
  it("admits the limit of the zone's day between both, and the whole limit again from its midnight", async () => {
    const counters = { now: at('2026-06-15T18:00:00Z') };
    const [a, b] = await startFleetOfTwo(
      onTestFinished,
      {},
      {
        clocks: [{ clock: () => counters.now }, { clock: () => counters.now }],
      },
    );
    await setSystemQuotaOnFleet(a, b, calendar(10, 'day', { timeZone: 'Asia/Kolkata' }));
    const admitted = async () => {
      let count = 0;
      for (let i = 0; i < 12; i += 1)
        for (const gateway of [a, b]) if ((await get(gateway)).status === 200) count += 1;
      return count;
    };
    expect(await admitted()).toBe(10);
    counters.now = at('2026-06-15T18:29:59.999Z');
    expect(await admitted()).toBe(0);
    // Kolkata's midnight is 18:30 UTC.
    counters.now = at('2026-06-15T18:30:00Z');
    expect(await admitted()).toBe(10);
  });
});
