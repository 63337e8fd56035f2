import { afterAll, afterEach, beforeAll, expect, inject } from 'vitest';
import { request } from './raw-http.js';
import {
  adminUser,
  basicAuth,
  devKey,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  userAuth,
  type StartClocks,
  type TestGateway,
} from './test-gateway.js';
import { startUpstream, type TestUpstream } from './upstream.js';

/** Two applications of conf/ besides the project's, for the suites that count per application. */
export const mobileId = '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
export const mobileKey = 'mobile-dev-key-0123456789abcdef0123';
export const webId = '5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a';
export const webKey = 'web-dev-key-0123456789abcdef01234567';
const applications = [
  { id: mobileId, name: 'Mobile', apikey_development: mobileKey },
  { id: webId, name: 'Web', apikey_development: webKey },
];

/** The seed's 429 body. */
export const tooMany = '{"id":"com.vendor.api.quota_exceeded","message":"Too Many Requests","success":false}';

export interface EnforcementGateways {
  /** The gateways' clock: tests move it instead of waiting. */
  clock: { now: number };
  /** A pets gateway over the suite's upstream on `clock`, stopped after the test that started it. */
  gatewayWith(overrides?: Record<string, unknown>): Promise<TestGateway>;
  /** The upstream every gateway of the suite proxies to. */
  upstream(): TestUpstream;
}

/** Registers the hooks of a quota-enforcement suite: one upstream for the suite, gateways per test. */
export function useEnforcementGateways(): EnforcementGateways {
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

  return {
    clock,
    upstream: () => upstream,
    async gatewayWith(overrides = {}) {
      const gateway = await startTestGateway(
        petsConfig(upstream.url, { applications, ...overrides }),
        {},
        { clock: () => clock.now },
      );
      gateways.push(gateway);
      return gateway;
    },
  };
}

/**
 * Two gateways on one Redis (a prefix of their own) over an upstream of their own (or `upstream`, which
 * the caller stops) and with clocks of its own when given, with the mobile application of conf/: a fleet, stopped by `defer` after the test.
 */
export async function startFleetOfTwo(
  defer: (cleanup: () => Promise<void> | void) => void,
  overrides: Record<string, unknown> = {},
  {
    upstream: given,
    clocks = [{}, {}],
  }: { upstream?: TestUpstream; clocks?: [StartClocks, StartClocks] } = {},
): Promise<[TestGateway, TestGateway]> {
  const upstream = given ?? (await startUpstream());
  if (!given) defer(() => upstream.close());
  const config = petsConfig(`${upstream.url}/pets`, {
    store: { type: 'redis', url: inject('redisUrl'), prefix: `test:fleet:${Date.now()}:${Math.random()}:` },
    applications: [applications[0]],
    ...overrides,
  });
  const a = await startTestGateway(config, {}, clocks[0]);
  defer(() => a.close());
  const b = await startTestGateway(config, {}, clocks[1]);
  defer(() => b.close());
  return [a, b];
}

/** Gives the System quota one restriction through `a`'s admin port, and waits until `b` has it from Redis. */
export async function setSystemQuotaOnFleet(
  a: TestGateway,
  b: TestGateway,
  restriction: Record<string, unknown>,
): Promise<void> {
  await setQuota(a, { type: 'API', name: 'System', restrictions: [restriction] }, systemQuotaId);
  await expect
    .poll(async () => {
      const res = await fetch(`${b.adminUrl}/api/portal/v1.3/quotas/${systemQuotaId}`, {
        headers: { authorization: userAuth(adminUser) },
      });
      return ((await res.json()) as { restrictions: unknown[] }).restrictions.length;
    })
    .toBe(1);
}

/** GET through the data plane with a key as Basic credentials. */
export const get = (gateway: TestGateway, key = devKey, path = '/pets/1') =>
  request(gateway.url, { path, headers: { authorization: basicAuth(key) } });

/** POST /pets with a body of `bytes` bytes, its length declared, with the project's development key. */
export const post = (gateway: TestGateway, bytes: number) =>
  request(gateway.url, {
    method: 'POST',
    path: '/pets',
    headers: { authorization: basicAuth(devKey), 'content-length': String(bytes) },
    body: 'x'.repeat(bytes),
  });

/** Puts `application` on plan `plan` through `gateway`'s admin port. */
export async function putOnPlan(gateway: TestGateway, application: string, plan: string): Promise<void> {
  const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/applications/${application}/quota`, {
    method: 'PUT',
    headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
    body: JSON.stringify({ plan }),
  });
  expect(res.status).toBe(200);
}

/**
 * The two stores a behaviour is shown on, for `describe.each`: its name, and the config overrides that
 * choose it (a Redis prefix of its own per call, so that tests never see each other's counters).
 */
export const eachStore: Array<[string, () => Record<string, unknown>]> = [
  ['the memory store', () => ({})],
  [
    'the Redis store',
    () => ({
      store: { type: 'redis', url: inject('redisUrl'), prefix: `test:${Date.now()}:${Math.random()}:` },
    }),
  ],
];
