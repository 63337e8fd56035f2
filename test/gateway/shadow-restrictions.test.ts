import { describe, expect, it } from 'vitest';
import { get, post, useEnforcementGateways, eachStore } from '../helpers/enforcement-gateways.js';
import {
  adminUser,
  mb,
  quotaUsage,
  rejectedOf,
  setQuota,
  systemQuotaId,
  throttle,
  userAuth,
  type TestGateway,
  accessLines,
} from '../helpers/test-gateway.js';

const { gatewayWith } = useEnforcementGateways();

const shadow = <T extends Record<string, unknown>>(restriction: T) => ({ ...restriction, mode: 'shadow' });
const systemUsage = (gateway: TestGateway) => quotaUsage(gateway.adminUrl, systemQuotaId);

describe.each(eachStore)('shadow restrictions on %s', (_store, store) => {
  it('count what an enforced one would admit and never refuse; the access line, the metric and usage say what they would have refused', async () => {
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      {
        type: 'API',
        name: 'System',
        restrictions: [throttle(5, 1, 'minute'), shadow(throttle(2, 1, 'minute'))],
      },
      systemQuotaId,
    );
    const answers = [];
    for (let i = 0; i < 6; i += 1) answers.push(await get(gateway));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200, 429]);
    // The RateLimit fields are the enforced restriction's alone.
    for (const answer of answers) {
      expect(answer.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/0";q=5;w=60`);
    }

    const lines = accessLines(gateway).slice(-6);
    expect(lines.map((line) => [line.quota, line.refusedBy ?? null])).toEqual([
      ['allowed', null],
      ['allowed', null],
      ['shadow_refused', `${systemQuotaId}/1`],
      ['shadow_refused', `${systemQuotaId}/1`],
      ['shadow_refused', `${systemQuotaId}/1`],
      ['rejected', `${systemQuotaId}/0`],
    ]);
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toContain('quotagate_shadow_refusals_total{quota="System",restriction="1"} 3');
    expect(metrics).toContain(
      'quotagate_quota_decisions_total{quota="System",restriction="0",decision="allowed"} 5',
    );
    expect(metrics).not.toMatch(/quotagate_quota_decisions_total\{quota="System",restriction="1"/);

    const usage = await systemUsage(gateway);
    expect(usage.restrictions[0]).not.toHaveProperty('mode');
    expect(usage.restrictions[0]).toMatchObject({ used: 5 });
    expect(usage.restrictions[1]).toMatchObject({ mode: 'shadow', used: 2 });
    expect(rejectedOf(usage.restrictions[1]!)).toBe(3);
  });

  it('keeps the counts when the mode changes: enforced, the restriction refuses at once what it had counted', async () => {
    const gateway = await gatewayWith(store());
    const withMode = (restriction: Record<string, unknown>) =>
      setQuota(gateway, { type: 'API', name: 'System', restrictions: [restriction] }, systemQuotaId);
    await withMode(shadow(throttle(2, 1, 'minute')));
    const shadowed = [await get(gateway), await get(gateway), await get(gateway)];
    expect(shadowed.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(shadowed.every((answer) => answer.headers.ratelimit === undefined)).toBe(true);

    await withMode(throttle(2, 1, 'minute'));
    const enforced = await get(gateway);
    expect(enforced.status).toBe(429);
    expect(enforced.headers.ratelimit).toMatch(new RegExp(`^"${systemQuotaId}/0";r=0;t=\\d+$`));
    expect((await systemUsage(gateway)).restrictions[0]).toMatchObject({ used: 2 });

    await withMode(shadow(throttle(2, 1, 'minute')));
    expect((await get(gateway)).status).toBe(200);
    expect(accessLines(gateway).at(-1)).toMatchObject({ quota: 'shadow_refused' });
  });

  it('lets through a body larger than a shadow byte restriction holds, which an enforced one answers 413', async () => {
    const gateway = await gatewayWith(store());
    // 0.001 MB = 1,048 bytes.
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.001, 1, 'minute')] },
      systemQuotaId,
    );
    expect((await post(gateway, 5000)).status).toBe(413);
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [shadow(mb(0.001, 1, 'minute'))] },
      systemQuotaId,
    );
    expect((await post(gateway, 5000)).status).toBe(200);
    expect(accessLines(gateway).at(-1)).toMatchObject({
      quota: 'shadow_refused',
      refusedBy: `${systemQuotaId}/0`,
    });
    // A small body fits: the shadow counter holds it, and the answer's bytes once the exchange is over.
    expect((await post(gateway, 100)).status).toBe(200);
    await expect.poll(async () => (await systemUsage(gateway)).restrictions[0]!.used).toBeGreaterThan(100);
  });
});

describe('the mode of a restriction through the Quota API', () => {
  it('answers a shadow restriction with its mode, an enforced one without, and names a mode it does not know', async () => {
    const gateway = await gatewayWith();
    const put = (mode: unknown) =>
      fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas/${systemQuotaId}`, {
        method: 'PUT',
        headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
        body: JSON.stringify({
          type: 'API',
          name: 'System',
          restrictions: [{ ...throttle(2, 1, 'minute'), mode }],
        }),
      });
    const shadowed = await put('shadow');
    expect(shadowed.status).toBe(200);
    expect(((await shadowed.json()) as { restrictions: unknown[] }).restrictions[0]).toMatchObject({
      mode: 'shadow',
    });
    const enforced = await put('enforce');
    expect(((await enforced.json()) as { restrictions: unknown[] }).restrictions[0]).not.toHaveProperty(
      'mode',
    );
    const unknown = await put('audit');
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toEqual({
      errors: [{ code: 400, message: 'restrictions[0].mode: must be one of enforce, shadow' }],
    });
  });
});
