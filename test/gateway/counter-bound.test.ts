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

const clock = { now: 1_800_000_000_000 };
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

let upstream: TestUpstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  gateway = await startTestGateway(
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
    {
      type: 'APPLICATION',
      name: 'Application Default',
      restrictions: [throttle(3, 1, 'minute')],
    },
    applicationDefaultQuotaId,
  );
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

const as = (name: string) =>
  request(gateway.url, { path: '/pets/1', headers: { 'x-pass': 'open', 'x-app': name } });

async function metric(name: string): Promise<number> {
  const text = await (
    await fetch(`${gateway.adminUrl}/metrics`, { headers: { authorization: userAuth(adminUser) } })
  ).text();
  const line = text.split('\n').find((entry) => entry.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
}

describe('the memory bound of the counters of one gateway', () => {
  it('admits callers while their counters fit, then refuses new ones with 503 and counts it', async () => {
    for (let i = 0; i < capacity; i += 1) expect((await as(caller(i))).status, caller(i)).toBe(200);
    const refused = await as(caller(capacity));
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('60');
    expect(JSON.parse(refused.body)).toMatchObject({ id: 'com.vendor.api.service_unavailable' });
    expect(await metric('quotagate_counter_store_full_total')).toBe(1);
    expect(await metric('quotagate_counter_memory_reserved_bytes')).toBeLessThanOrEqual(1_048_576);
  });

  it('never forgets the counts of callers it holds: they get their limit, then 429, not 503', async () => {
    expect((await as(caller(0))).status).toBe(200);
    expect((await as(caller(0))).status).toBe(200);
    expect((await as(caller(0))).status).toBe(429);
    expect((await as(caller(capacity + 1))).status).toBe(503);
  });

  it('takes new callers again once idle counters have expired', async () => {
    clock.now += 61_000 + 1_000;
    expect((await as(caller(capacity + 2))).status).toBe(200);
    expect((await as(caller(0))).status).toBe(200);
  });
});
