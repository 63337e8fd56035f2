import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { counterReservation } from '../../src/limiter/memory-counter-store.js';
import { request } from '../helpers/raw-http.js';
import {
  petsConfig,
  setQuota,
  startTestGateway,
  userAuth,
  adminUser,
  type TestGateway,
  applicationDefaultQuotaId,
  throttle,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * The memory bound of a gateway's own counters (store.maxCounterMemoryMb), through the data plane: a
 * plugin that names a new caller per request must not grow the counters without end.
 */

const caller = (i: number) => `caller-${String(i).padStart(5, '0')}`;
// `<quota id>:0:<12-digit hash of what it counts>:app:{app:<16-digit hash>}:<application>`
const counterKeyLength =
  applicationDefaultQuotaId.length +
  ':0:'.length +
  12 +
  ':app:'.length +
  '{app:}:'.length +
  16 +
  caller(0).length;
const capacity = Math.floor(1_048_576 / counterReservation('k'.repeat(counterKeyLength)));

const enforced = throttle(3, 1, 'minute');
/** A shadow twin of `enforced`: a counter of its own per caller, keyed as long. */
const shadowTwin = { ...throttle(2, 1, 'minute'), mode: 'shadow' };

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(() => upstream.close());

/** A gateway whose counters may take 1 MiB, on `clock`, with `restrictions` on every application. */
async function boundGateway(clock: { now: number }, restrictions: unknown[]): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig(upstream.url, {
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: './test/fixtures/plugins/sync-plugin.js',
      requiredHeaderValue: 'open',
      store: { type: 'memory', maxCounterMemoryMb: 1 },
    }),
    {},
    { clock: () => clock.now },
  );
  await setQuota(
    gateway,
    { type: 'APPLICATION', name: 'Application Default', restrictions },
    applicationDefaultQuotaId,
  );
  return gateway;
}

const as = (gateway: TestGateway, name: string) =>
  request(gateway.url, { path: '/pets/1', headers: { 'x-pass': 'open', 'x-app': name } });

/** The value of a metric of `gateway`, its name with its labels as /metrics spells them. */
async function metric(gateway: TestGateway, name: string): Promise<number> {
  const text = await (
    await fetch(`${gateway.adminUrl}/metrics`, { headers: { authorization: userAuth(adminUser) } })
  ).text();
  const line = text.split('\n').find((entry) => entry.startsWith(`${name} `));
  return Number(line?.slice(name.length + 1));
}

describe('the memory bound of the counters of one gateway', () => {
  const clock = { now: 1_800_000_000_000 };
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await boundGateway(clock, [enforced]);
  });
  afterAll(() => gateway.close());

  it('admits callers while their counters fit, then refuses new ones with 503 and counts it', async () => {
    for (let i = 0; i < capacity; i += 1) expect((await as(gateway, caller(i))).status, caller(i)).toBe(200);
    const refused = await as(gateway, caller(capacity));
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('60');
    expect(JSON.parse(refused.body)).toMatchObject({ id: 'com.vendor.api.service_unavailable' });
    expect(await metric(gateway, 'quotagate_store_full_total')).toBe(1);
    expect(await metric(gateway, 'quotagate_store_memory_reserved_bytes')).toBeLessThanOrEqual(1_048_576);
  });

  it('never forgets the counts of callers it holds: they get their limit, then 429, not 503', async () => {
    expect((await as(gateway, caller(0))).status).toBe(200);
    expect((await as(gateway, caller(0))).status).toBe(200);
    expect((await as(gateway, caller(0))).status).toBe(429);
    expect((await as(gateway, caller(capacity + 1))).status).toBe(503);
  });

  it('takes new callers again once idle counters have expired', async () => {
    clock.now += 61_000 + 1_000;
    expect((await as(gateway, caller(capacity + 2))).status).toBe(200);
    expect((await as(gateway, caller(0))).status).toBe(200);
  });
});

describe('a shadow restriction under the memory bound', () => {
  const clock = { now: 1_800_000_000_000 };
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await boundGateway(clock, [enforced, shadowTwin]);
  });
  afterAll(() => gateway.close());

  it('never lowers the callers the enforced one admits before the 503: its counts go first, and it says so', async () => {
    for (let i = 0; i < capacity; i += 1) expect((await as(gateway, caller(i))).status, caller(i)).toBe(200);
    expect((await as(gateway, caller(capacity))).status).toBe(503);
    expect(await metric(gateway, 'quotagate_store_full_total')).toBe(1);
    // Half the callers had a shadow count before the bound; each later caller's counter took one's room.
    const dropped = await metric(gateway, 'quotagate_shadow_counts_dropped_total');
    const uncounted = await metric(
      gateway,
      'quotagate_shadow_uncounted_total{quota="Application Default",restriction="1"}',
    );
    expect(dropped).toBeGreaterThan(capacity / 3);
    expect(uncounted).toBeGreaterThan(capacity / 3);
  });

  it('keeps the enforced counts it holds: their callers get their limit, then 429', async () => {
    expect((await as(gateway, caller(capacity - 1))).status).toBe(200);
    expect((await as(gateway, caller(capacity - 1))).status).toBe(200);
    expect((await as(gateway, caller(capacity - 1))).status).toBe(429);
  });
});
