import type { ClientHttp2Session } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { eachStore, startFleetOfTwo, useEnforcementGateways } from '../../helpers/enforcement-gateways.js';
import { http2Request, http2Session } from '../../helpers/http2-client.js';
import {
  basicAuth,
  devKey,
  mb,
  setQuota,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../../helpers/test-gateway.js';

const { gatewayWith, upstream } = useEnforcementGateways();
const defer = cleanupAfterEach();
const auth = { authorization: basicAuth(devKey) };

async function sessionTo(gateway: TestGateway): Promise<ClientHttp2Session> {
  const session = await http2Session(gateway.url);
  defer(() => session.close());
  return session;
}

describe.each(eachStore)('HTTP/2 streams on %s', (_store, store) => {
  it('are counted by a throttle as HTTP/1.1 requests are: the one past the limit is 429 with its fields', async () => {
    const gateway = await gatewayWith(store());
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'minute')] },
      systemQuotaId,
    );
    const session = await sessionTo(gateway);
    const answers = [];
    for (let i = 0; i < 4; i += 1)
      answers.push(await http2Request(session, { path: '/pets/1', headers: auth }));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 429]);
    expect(answers[3]!.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(answers[3]!.headers.ratelimit).toMatch(/;r=0;/);
  });

  it('charge a throttlemb the body bytes of a stream that declared no length, after the exchange', async () => {
    const gateway = await gatewayWith(store());
    // 0.01 MB = 10,485 bytes: a 6,000-byte body, and its echo back, spend it.
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(0.01, 1, 'minute')] },
      systemQuotaId,
    );
    const session = await sessionTo(gateway);
    const first = await http2Request(session, {
      method: 'POST',
      path: '/pets',
      headers: auth,
      body: 'x'.repeat(6_000),
    });
    expect(first.status).toBe(200);
    expect(upstream().requests.at(-1)!.headers['content-length']).toBeUndefined();
    const second = await http2Request(session, { path: '/pets/1', headers: auth });
    expect(second.status).toBe(429);
  });
});

describe('HTTP/2 streams on a fleet of two', () => {
  it('share the one limit, whichever gateway each stream reaches', async () => {
    const [a, b] = await startFleetOfTwo(defer);
    await setQuota(
      a,
      { type: 'API', name: 'System', restrictions: [throttle(4, 1, 'minute')] },
      systemQuotaId,
    );
    const sessions = [await sessionTo(a), await sessionTo(b)];
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1)
      statuses.push((await http2Request(sessions[i % 2]!, { path: '/pets/1', headers: auth })).status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(4);
    expect(statuses.slice(4)).toEqual([429, 429]);
  });
});
