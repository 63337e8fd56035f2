import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startFleetOfTwo } from '../helpers/enforcement-gateways.js';
import { request } from '../helpers/raw-http.js';
import {
  adminUser,
  basicAuth,
  devKey,
  setQuota,
  systemQuotaId,
  throttle,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';

/** Restrictions counted by client address across a fleet: one count per client, whichever gateway it hits. */
const defer = cleanupAfterEach();

const from = (gateway: TestGateway, address: string) =>
  request(gateway.url, {
    path: '/pets/1',
    headers: { authorization: basicAuth(devKey), 'x-forwarded-for': address },
  });

describe('a restriction counted by client on a fleet of two gateways on one Redis', () => {
  it('keeps one count per client across the fleet, and each client its own', async () => {
    const [a, b] = await startFleetOfTwo(defer, { trustProxy: ['127.0.0.1'] });
    await setQuota(
      a,
      { type: 'API', name: 'System', restrictions: [throttle(4, 1, 'minute', { by: 'client' })] },
      systemQuotaId,
    );
    // b has the quota from Redis before the first request reaches it.
    await expect
      .poll(async () => {
        const res = await fetch(`${b.adminUrl}/api/portal/v1.3/quotas/${systemQuotaId}`, {
          headers: { authorization: userAuth(adminUser) },
        });
        return ((await res.json()) as { restrictions: unknown[] }).restrictions.length;
      })
      .toBe(1);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1) statuses.push((await from(i % 2 === 0 ? a : b, '198.51.100.1')).status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(4);
    expect(statuses.slice(4)).toEqual([429, 429]);
    expect((await from(b, '198.51.100.2')).status).toBe(200);
    expect((await from(a, '198.51.100.2')).status).toBe(200);
  });
});
