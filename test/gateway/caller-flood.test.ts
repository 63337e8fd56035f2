import { describe, expect, it } from 'vitest';
import { callerBounds } from '../../src/quota/caller-book.js';
import { eachStore, useEnforcementGateways } from '../helpers/enforcement-gateways.js';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  setQuota,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';

const { gatewayWith } = useEnforcementGateways();

const from = (gateway: TestGateway, address: string) =>
  request(gateway.url, {
    path: '/pets/1',
    headers: { authorization: basicAuth(devKey), 'x-forwarded-for': address },
  });

/** The `n`th address of 10.0.0.0/8: a flood of new clients. */
const address = (n: number) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;

describe.each(eachStore)('a flood of new client addresses on %s', (_store, store) => {
  it('neither resets nor refuses the clients already counted: the flood beyond the bound shares one count', async () => {
    const gateway = await gatewayWith({ ...store(), trustProxy: ['127.0.0.1'] });
    // An hour's window: Redis expires counters in its own time, and the flood may take over a minute.
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(2, 1, 'hour', { by: 'client' })] },
      systemQuotaId,
    );
    expect((await from(gateway, '198.51.100.1')).status).toBe(200);
    // Every place but the established client's taken by the flood, a few at a time.
    const flood = callerBounds.perApplication - 1;
    for (let n = 0; n < flood; n += 50) {
      const batch = [];
      for (let i = n; i < Math.min(n + 50, flood); i += 1) batch.push(from(gateway, address(i)));
      expect(new Set((await Promise.all(batch)).map((answer) => answer.status))).toEqual(new Set([200]));
    }
    // Beyond the bound, new clients share the overflow count: its limit, then 429, never 503.
    const beyond = [];
    for (let i = flood; i < flood + 4; i += 1) beyond.push((await from(gateway, address(i))).status);
    expect(beyond).toEqual([200, 200, 429, 429]);
    // The established client keeps its count (1 of 2) and its own room.
    expect((await from(gateway, '198.51.100.1')).status).toBe(200);
    expect((await from(gateway, '198.51.100.1')).status).toBe(429);
    // A client of the flood keeps its own count too.
    expect((await from(gateway, address(0))).status).toBe(200);
  }, 120_000);
});
