import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  mobileId,
  mobileKey,
  setSystemQuotaOnFleet,
  startFleetOfTwo,
  webId,
  webKey,
} from '../helpers/enforcement-gateways.js';
import { floodStatuses, tally, tenants } from '../helpers/floods.js';
import { request } from '../helpers/raw-http.js';
import { basicAuth, devKey, throttle, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Restrictions counted by caller across a fleet: one count per caller, whichever gateway it hits; each
 * gateway keeps its own book of callers per application.
 */
const defer = cleanupAfterEach();

const from = (gateway: TestGateway, address: string) =>
  request(gateway.url, {
    path: '/pets/1',
    headers: { authorization: basicAuth(devKey), 'x-forwarded-for': address },
  });

describe('a restriction counted by client on a fleet of two gateways on one Redis', () => {
  it('keeps one count per client across the fleet, and each client its own', async () => {
    const [a, b] = await startFleetOfTwo(defer, { trustProxy: ['127.0.0.1'] });
    await setSystemQuotaOnFleet(a, b, throttle(4, 1, 'minute', { by: 'client' }));
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1) statuses.push((await from(i % 2 === 0 ? a : b, '198.51.100.1')).status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(4);
    expect(statuses.slice(4)).toEqual([429, 429]);
    expect((await from(b, '198.51.100.2')).status).toBe(200);
    expect((await from(a, '198.51.100.2')).status).toBe(200);
  });
});

describe('a restriction counted by header on a fleet of two gateways on one Redis', () => {
  it("leaves another application's new tenants their own counts, across the fleet, when one application floods a gateway", async () => {
    const [a, b] = await startFleetOfTwo(defer, {
      applications: [
        { id: mobileId, name: 'Mobile', apikey_development: mobileKey },
        { id: webId, name: 'Web', apikey_development: webKey },
      ],
    });
    // An hour's window: the flood may take over a minute on a loaded machine.
    await setSystemQuotaOnFleet(a, b, throttle(2, 1, 'hour', { by: 'header:X-Tenant' }));
    // Mobile floods a with 10,050 new tenants: 10,000 counted apart there, the rest on Mobile's overflow
    // count (2 admitted).
    expect(tally(await floodStatuses(a, mobileKey, tenants('m', 10_050)))).toEqual({
      ok: 10_002,
      refused: 48,
      other: 0,
    });
    // Web's 8 new tenants have counts of their own on a, and the same counts on b: 2 each in the fleet.
    const web = tenants('w', 8);
    expect(await floodStatuses(a, webKey, web)).toEqual(Array(8).fill(200));
    expect(await floodStatuses(b, webKey, web)).toEqual(Array(8).fill(200));
    expect(await floodStatuses(a, webKey, web)).toEqual(Array(8).fill(429));
    // Mobile's next new tenant is on its full overflow count on a; b, which it did not flood, counts it.
    expect(await floodStatuses(a, mobileKey, [{ 'x-tenant': 'm-new' }])).toEqual([429]);
    expect(await floodStatuses(b, mobileKey, [{ 'x-tenant': 'm-new' }])).toEqual([200]);
  }, 300_000);
});
