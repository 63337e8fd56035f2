import { describe, expect, it } from 'vitest';
import { eachStore, useEnforcementGateways } from '../helpers/enforcement-gateways.js';
import { withKey } from '../helpers/grpc-credentials.js';
import { frameType, headersFrame, openRawHttp2, requestFields, statusOf } from '../helpers/http2-frames.js';
import { rawExchange, request } from '../helpers/raw-http.js';
import { setQuota, systemQuotaId, throttle, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Callers trying to spread themselves over many counts, or to slip out of their own, with what a client
 * controls on the wire (issue 33): the counted header sent twice or spelled otherwise, and addresses
 * spelled otherwise. See docs/quotas.md, "Counting by caller".
 */
const { gatewayWith } = useEnforcementGateways();

const systemBy = (gateway: TestGateway, by: string) =>
  setQuota(
    gateway,
    { type: 'API', name: 'System', restrictions: [throttle(2, 1, 'minute', { by })] },
    systemQuotaId,
  );

/** The status of GET /pets/1 sent as these exact header lines on a socket of its own. */
async function rawStatus(gateway: TestGateway, ...lines: string[]): Promise<number> {
  const head = ['GET /pets/1 HTTP/1.1', 'Host: pets', `Authorization: ${withKey.authorization}`, ...lines];
  const answer = await rawExchange(gateway.url, `${head.join('\r\n')}\r\nConnection: close\r\n\r\n`);
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
}

const statusesFrom = async (gateway: TestGateway, addresses: string[]) => {
  const answers = [];
  for (const address of addresses) {
    const headers = { ...withKey, 'x-forwarded-for': address };
    answers.push((await request(gateway.url, { path: '/pets/1', headers })).status);
  }
  return answers;
};

describe.each(eachStore)('a caller trying to spread itself over counts on %s', (_store, store) => {
  it('is refused 400 when it sends the counted header in two field lines, and nothing is counted', async () => {
    const gateway = await gatewayWith(store());
    await systemBy(gateway, 'header:X-Tenant');
    const twice = await request(gateway.url, {
      path: '/pets/1',
      headers: { ...withKey, 'x-tenant': ['acme', 'evil'] },
    });
    expect(twice.status).toBe(400);
    expect(twice.body).toContain('x-tenant');
    // The usage path reads the count of the caller a request names: with two lines, it names none.
    const usage = await request(gateway.url, {
      path: '/_quotagate/usage',
      headers: { ...withKey, 'x-tenant': ['acme', 'evil'] },
    });
    expect(usage.status).toBe(400);
    // Two lines whose names differ in case are the same field twice.
    expect(await rawStatus(gateway, 'X-Tenant: acme', 'x-TENANT: acme')).toBe(400);
    // acme's count is whole: its own two requests pass.
    expect(await rawStatus(gateway, 'X-Tenant: acme')).toBe(200);
    expect(await rawStatus(gateway, 'X-Tenant: acme')).toBe(200);
    expect(await rawStatus(gateway, 'X-Tenant: acme')).toBe(429);
  });

  it('is refused 400 when it sends the counted header twice on an HTTP/2 stream', async () => {
    const gateway = await gatewayWith(store());
    await systemBy(gateway, 'header:X-Tenant');
    const connection = await openRawHttp2(Number(new URL(gateway.url).port));
    try {
      const fields = [
        ['authorization', withKey.authorization],
        ['x-tenant', 'acme'],
        ['x-tenant', 'evil'],
      ] as const;
      connection.send(
        headersFrame(1, requestFields(new URL(gateway.url).host, '/pets/1', fields), { endStream: true }),
      );
      const answer = await connection.frame((received) => received.streamId === 1);
      expect([answer.type, statusOf(answer)]).toEqual([frameType.headers, 400]);
    } finally {
      connection.close();
    }
  });

  it('is one caller whatever the case of the header name, the case of its value and the whitespace around it', async () => {
    const gateway = await gatewayWith(store());
    await systemBy(gateway, 'header:X-Tenant');
    expect(await rawStatus(gateway, 'X-TENANT: acme')).toBe(200);
    expect(await rawStatus(gateway, 'x-tenant:    ACME   ')).toBe(200);
    expect(await rawStatus(gateway, 'X-Tenant:\tAcme\t')).toBe(429);
    // An empty value names no one: the request is counted by its client address, as without the header.
    expect(await rawStatus(gateway, 'X-Tenant: ')).toBe(200);
    expect(await rawStatus(gateway)).toBe(200);
    expect(await rawStatus(gateway, 'X-Tenant:')).toBe(429);
  });

  it('is one client whichever way a trusted proxy spells its IPv4 address', async () => {
    const gateway = await gatewayWith({ ...store(), trustProxy: ['127.0.0.1'] });
    await systemBy(gateway, 'client');
    const spellings = ['198.51.100.1', '::ffff:198.51.100.1', '::FFFF:198.51.100.1', '::ffff:c633:6401'];
    expect(await statusesFrom(gateway, spellings)).toEqual([200, 200, 429, 429]);
    // The addresses of the IPv4-mapped block are not one caller: each is the IPv4 client it maps.
    expect(await statusesFrom(gateway, ['::ffff:198.51.100.2'])).toEqual([200]);
  });

  it('is one client whichever way its /64 is spelled', async () => {
    const gateway = await gatewayWith({ ...store(), trustProxy: ['127.0.0.1'] });
    await systemBy(gateway, 'client');
    const spellings = ['2001:db8:1:2::1', '2001:0DB8:0001:0002:0000:0000:0000:0009', '2001:db8:1:2:a:b:c:d'];
    expect(await statusesFrom(gateway, spellings)).toEqual([200, 200, 429]);
  });
});
