import { describe, expect, inject, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { setSystemQuotaOnFleet } from '../helpers/enforcement-gateways.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  quotaUsage,
  rejectedOf,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

/**
 * The console's rejection sparklines across a fleet: gateways on one Redis hand their rejections to the
 * fleet's lines, so any gateway's usage shows all of them. Real gateways, a real Redis.
 */
const defer = cleanupAfterEach();

async function fleetOfTwo(): Promise<[TestGateway, TestGateway]> {
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const prefix = `test:rejections:${Date.now()}:${Math.random()}:`;
  const config = petsConfig(`${upstream.url}/pets`, {
    store: { type: 'redis', url: inject('redisUrl'), prefix },
  });
  const a = await startTestGateway(config);
  defer(() => a.close());
  const b = await startTestGateway(config);
  defer(() => b.close());
  return [a, b];
}

async function requests(gateway: TestGateway, count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i += 1) {
    const res = await fetch(`${gateway.url}/pets/1`, { headers: { authorization: basicAuth(devKey) } });
    await res.arrayBuffer();
    statuses.push(res.status);
  }
  return statuses;
}

/** The System quota's usage, as a gateway answers it. */
const systemUsage = (gateway: TestGateway) => quotaUsage(gateway.adminUrl, systemQuotaId);

/** The rejections of the System quota's restriction over the last five minutes, as a gateway's usage says. */
const rejected = async (gateway: TestGateway) => rejectedOf((await systemUsage(gateway)).restrictions[0]!);

describe('rejections across a fleet on Redis', () => {
  it("shows every gateway's rejections on any gateway, its own at once and the others' once handed over", async () => {
    const [a, b] = await fleetOfTwo();
    await setSystemQuotaOnFleet(a, b, throttle(2, 1, 'hour'));
    expect(await requests(a, 4)).toEqual([200, 200, 429, 429]);
    expect(await requests(b, 3)).toEqual([429, 429, 429]);
    // a hands its own over before it answers; b's are b's until b hands them over.
    expect(await rejected(a)).toBe(2);
    expect(await rejected(b)).toBe(5);
    expect(await rejected(a)).toBe(5);
    // A gateway that stops hands over what it has left.
    expect(await requests(b, 1)).toEqual([429]);
    await b.close();
    expect(await rejected(a)).toBe(6);
  });
});

describe('a shadow restriction across a fleet on Redis', () => {
  it('counts exactly the limit over both gateways, lets every request through, and both report what it would have refused', async () => {
    const [a, b] = await fleetOfTwo();
    await setSystemQuotaOnFleet(a, b, { ...throttle(10, 1, 'hour'), mode: 'shadow' });
    const statuses: number[] = [];
    for (let i = 0; i < 15; i += 1) statuses.push(...(await requests(a, 1)), ...(await requests(b, 1)));
    expect(statuses).toEqual(Array.from({ length: 30 }, () => 200));

    const shadowRefusals = async (gateway: TestGateway) => {
      const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
      return Number(
        /^quotagate_shadow_refusals_total\{quota="System",restriction="0"\} (\d+)$/m.exec(text)?.[1] ?? 0,
      );
    };
    expect((await shadowRefusals(a)) + (await shadowRefusals(b))).toBe(20);
    expect((await systemUsage(a)).restrictions[0]!.used).toBe(10);
    // Every gateway's usage shows the fleet's "would have refused", once each has handed its own over.
    await b.close();
    expect(await rejected(a)).toBe(20);
  });
});
