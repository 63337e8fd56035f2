import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  adminUser,
  basicAuth,
  devKey,
  mb,
  setQuota,
  systemQuotaId,
  throttle,
  userAuth,
} from '../helpers/test-gateway.js';
import { eachStore, get, post, useEnforcementGateways } from '../helpers/enforcement-gateways.js';

const { clock, gatewayWith, upstream } = useEnforcementGateways();

describe('quota enforcement: sliding windows on the gateway clock', () => {
  it('gives a client over its limit steady service at the limit, not a lockout', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(10, 10, 'seconds')] },
      systemQuotaId,
    );
    let admitted = 0;
    const start = clock.now;
    // 5 attempts every second for 60 s: 300 attempts at a limit of 10 per 10 s.
    for (let t = 0; t < 60_000; t += 1000) {
      clock.now = start + t;
      for (let i = 0; i < 5; i += 1) if ((await get(gateway)).status === 200) admitted += 1;
    }
    expect(admitted).toBeGreaterThanOrEqual(55);
    expect(admitted).toBeLessThanOrEqual(60);
  });
});

describe('quota enforcement: throttlemb', () => {
  it('rejects up front a declared body larger than what is left, before the upstream sees it', async () => {
    const gateway = await gatewayWith();
    // 0.01 MB = 10,485 bytes: after a first body of 4,000 and its echo, a second of 5,000 does not fit
    // (and would alone).
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.01, 1, 'minute')] },
      systemQuotaId,
    );
    expect((await post(gateway, 4000)).status).toBe(200);
    const before = upstream().requests.length;
    const res = await post(gateway, 5000);
    expect(res.status).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(upstream().requests.length).toBe(before);
  });

  it('counts chunked request bodies and response bodies from the streams, and cuts the body that passes what is left', async () => {
    const gateway = await gatewayWith();
    // 0.01 MB = 10,485 bytes.
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.01, 1, 'minute')] },
      systemQuotaId,
    );
    const chunked = () =>
      new Promise<number>((resolve, reject) => {
        const req = http.request(
          `${gateway.url}/pets`,
          { method: 'POST', headers: { authorization: basicAuth(devKey) } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.write('y'.repeat(2000));
        setImmediate(() => req.end('y'.repeat(2000)));
      });
    expect(await chunked()).toBe(200);
    const usage = (await (
      await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas/${systemQuotaId}/usage`, {
        headers: { authorization: userAuth(adminUser) },
      })
    ).json()) as { restrictions: Array<{ used: number; unit: string; limit: number }> };
    // 4000 request bytes plus the echo of them (the upstream answers with the request as JSON).
    expect(usage.restrictions[0]).toMatchObject({ unit: 'bytes', limit: 10_485 });
    expect(usage.restrictions[0]!.used).toBeGreaterThan(8_000);
    // About 2,000 bytes are left: the next body is admitted, cut as it passes them, and answered as
    // the refusal it would have been (no answer had begun); the upstream never took it whole.
    const before = upstream().requests.length;
    expect(await chunked()).toBe(429);
    expect(upstream().requests.length).toBe(before);
    expect(await chunked()).toBe(429);
  });
});

describe.each(eachStore)('quota enforcement: a body no window could hold, on %s', (_store, store) => {
  it('answers 413 with the RateLimit fields of the restrictions it is too large for and a message naming the smallest, and closes', async () => {
    const gateway = await gatewayWith(store());
    // 10,485 and 1,048 bytes a minute, and 100 messages: 2,000 bytes fit the first, never the second.
    await setQuota(
      gateway,
      {
        type: 'API',
        name: 'System',
        restrictions: [mb(0.01, 1, 'minute'), mb(0.001, 1, 'minute'), throttle(100, 1, 'minute')],
      },
      systemQuotaId,
    );
    expect((await get(gateway)).status).toBe(200);
    const usage = await request(gateway.url, {
      path: '/_quotagate/usage',
      headers: { authorization: basicAuth(devKey) },
    });
    const counted = (
      JSON.parse(usage.body) as { restrictions: Array<{ used: number; resetSeconds: number }> }
    ).restrictions[1]!;
    expect(counted.used).toBeGreaterThan(0);
    const before = upstream().requests.length;
    const res = await post(gateway, 2000);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({
      id: 'com.vendor.api.payload_too_large',
      message: `Payload Too Large: a body of 2000 bytes is more than restriction ${systemQuotaId}/1 allows in any 60 seconds (1048 bytes)`,
      success: false,
    });
    expect(res.headers['ratelimit-policy']).toBe(`"${systemQuotaId}/1";q=1048;w=60;qu="content-bytes"`);
    expect(res.headers.ratelimit).toBe(
      `"${systemQuotaId}/1";r=${1048 - counted.used};t=${counted.resetSeconds}`,
    );
    expect(res.headers['retry-after']).toBeUndefined();
    expect(res.headers.connection).toBe('close');
    expect(upstream().requests.length).toBe(before);
    // Nothing was charged: a body that fits still goes through.
    expect((await get(gateway)).status).toBe(200);
  });
});
