import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  adminCall,
  applicationDefaultQuotaId,
  petsApiId,
  getPetMethodId,
  petsConfig,
  setQuota,
  startTestGateway,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';

/**
 * Giving an application a quota of its own, or a plan, takes it off the Application Default: every
 * restriction of the Application Default stops counting it. The answer that does it names each one the
 * application no longer has, so that a token budget does not vanish unsaid. A real gateway.
 */
const defer = cleanupAfterEach();
const mobile = {
  id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f',
  name: 'Mobile app',
  apikey_development: 'app-key-0123456789abcdef0123456789',
};
const tokens = {
  api: '*',
  method: '*',
  type: 'throttleunits',
  config: { units: 100000, per: 1, period: 'day', header: 'x-tokens' },
};
const getPets = throttle(100, 1, 'minute', { api: petsApiId, method: getPetMethodId });

async function start(): Promise<TestGateway> {
  const gateway = await startTestGateway(petsConfig('http://127.0.0.1:9/pets', { applications: [mobile] }));
  defer(() => gateway.close());
  await setQuota(
    gateway,
    { type: 'APPLICATION', name: 'Application Default', restrictions: [tokens, getPets] },
    applicationDefaultQuotaId,
  );
  return gateway;
}

const call = async (gateway: TestGateway, method: string, body: unknown) => {
  const res = await adminCall(gateway, method, `/applications/${mobile.id}/quota`, body);
  return { status: res.status, body: (await res.json()) as { warnings?: string[] } };
};

const tokensWarning =
  "the Application Default's restriction 1 (100,000 units (x-tokens) per 1 day on every API) no longer counts this application: add it to its quota to keep it";

describe("an application's first quota of its own, or its plan", () => {
  it('answers 201 with a warning for each restriction of the Application Default the new quota lacks', async () => {
    const gateway = await start();
    const created = await call(gateway, 'POST', { restrictions: [getPets] });
    expect(created.status).toBe(201);
    expect(created.body.warnings).toEqual([tokensWarning]);
  });

  it('warns of nothing when the new quota keeps every restriction of the Application Default', async () => {
    const gateway = await start();
    const created = await call(gateway, 'POST', {
      restrictions: [tokens, getPets, throttle(5, 1, 'second')],
    });
    expect(created.status).toBe(201);
    expect(created.body).not.toHaveProperty('warnings');
  });

  it('warns, through PUT, of what a plan lacks, and not on a later change of an own quota', async () => {
    const gateway = await start();
    const gold = await setQuota(gateway, { type: 'APPLICATION', name: 'Gold', restrictions: [tokens] });
    const onPlan = await call(gateway, 'PUT', { plan: gold });
    expect(onPlan.status).toBe(200);
    expect(onPlan.body.warnings).toEqual([
      "the Application Default's restriction 2 (100 messages per 1 minute on Pet Store › getPet) no longer counts this application: add it to its quota to keep it",
    ]);
    const own = await call(gateway, 'PUT', { restrictions: [] });
    expect(own.status).toBe(200);
    expect(own.body.warnings).toBeUndefined();
  });
});
