import { describe, expect, it } from 'vitest';
import { addressBlock } from '../../src/upstream/fields/caller-keys.js';
import { eachStore, mobileKey, useEnforcementGateways, webKey } from '../helpers/enforcement-gateways.js';
import { request } from '../helpers/raw-http.js';
import {
  applicationDefaultQuotaId,
  basicAuth,
  devKey,
  quotaUsage,
  setQuota,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';

const { gatewayWith } = useEnforcementGateways();

/** GET /pets/1 with `key`, and these headers. */
const getWith = (gateway: TestGateway, headers: Record<string, string>, key = devKey) =>
  request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(key), ...headers } });
const from = (address: string) => ({ 'x-forwarded-for': address });

const statuses = async (
  gateway: TestGateway,
  headers: Record<string, string>,
  times: number,
  key?: string,
) => {
  const answers = [];
  for (let i = 0; i < times; i += 1) answers.push((await getWith(gateway, headers, key)).status);
  return answers;
};

const systemBy = (gateway: TestGateway, by: string, messages = 2) =>
  setQuota(
    gateway,
    { type: 'API', name: 'System', restrictions: [throttle(messages, 1, 'minute', { by })] },
    systemQuotaId,
  );

describe('the caller an address stands for', () => {
  it.each([
    ['192.0.2.7', '192.0.2.7'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::ffff', '2001:db8:1:2::/64'],
    ['2001:DB8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
    // Spelled otherwise: the IPv4 client an IPv4-mapped address maps, one /64 however it is written.
    ['::ffff:192.0.2.7', '192.0.2.7'],
    ['::FFFF:192.0.2.7', '192.0.2.7'],
    ['0:0:0:0:0:ffff:192.0.2.7', '192.0.2.7'],
    ['::ffff:c000:207', '192.0.2.7'],
    ['2001:0DB8:0001:0002:0000:0000:0000:0009', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::', '2001:db8:1:2::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
  ])('%s is counted as %s', (address, block) => {
    expect(addressBlock(address)).toBe(block);
  });
});

describe.each(eachStore)('restrictions counted by caller on %s', (_store, store) => {
  it('count each client address apart when the peer is a trusted proxy', async () => {
    const gateway = await gatewayWith({ ...store(), trustProxy: ['127.0.0.1'] });
    await systemBy(gateway, 'client');
    expect(await statuses(gateway, from('198.51.100.1'), 3)).toEqual([200, 200, 429]);
    expect(await statuses(gateway, from('198.51.100.2'), 3)).toEqual([200, 200, 429]);
    // A proxy's chain names the client as the last address the trusted peers did not add.
    expect(await statuses(gateway, from('198.51.100.1, 127.0.0.1'), 1)).toEqual([429]);
  });

  it('ignore X-Forwarded-For from an untrusted peer, so one client cannot spread itself over many counts', async () => {
    const gateway = await gatewayWith(store());
    await systemBy(gateway, 'client');
    const answers = [];
    for (let i = 0; i < 4; i += 1) answers.push((await getWith(gateway, from(`203.0.113.${i}`))).status);
    expect(answers).toEqual([200, 200, 429, 429]);
  });

  it('count an IPv6 network by its /64', async () => {
    const gateway = await gatewayWith({ ...store(), trustProxy: ['127.0.0.1'] });
    await systemBy(gateway, 'client');
    expect(await statuses(gateway, from('2001:db8:1:2::1'), 1)).toEqual([200]);
    expect(await statuses(gateway, from('2001:db8:1:2:ffff::9'), 2)).toEqual([200, 429]);
    expect(await statuses(gateway, from('2001:db8:1:3::1'), 3)).toEqual([200, 200, 429]);
  });

  it('count each value of the header apart, and a request without it by its client address', async () => {
    const gateway = await gatewayWith({ ...store(), trustProxy: ['127.0.0.1'] });
    await systemBy(gateway, 'header:X-Tenant');
    expect(await statuses(gateway, { 'x-tenant': 'acme' }, 3)).toEqual([200, 200, 429]);
    expect(await statuses(gateway, { 'X-Tenant': 'globex' }, 3)).toEqual([200, 200, 429]);
    expect(await statuses(gateway, from('198.51.100.1'), 3)).toEqual([200, 200, 429]);
    expect(await statuses(gateway, from('198.51.100.2'), 1)).toEqual([200]);
    // A value that spells an address is a value, not that client.
    expect(await statuses(gateway, { 'x-tenant': 'client 198.51.100.2' }, 1)).toEqual([200]);
  });

  it('count an application quota per application and per client', async () => {
    const gateway = await gatewayWith({ ...store(), trustProxy: ['127.0.0.1'] });
    await setQuota(
      gateway,
      {
        type: 'APPLICATION',
        name: 'Application Default',
        restrictions: [throttle(2, 1, 'minute', { by: 'client' })],
      },
      applicationDefaultQuotaId,
    );
    expect(await statuses(gateway, from('198.51.100.1'), 3, mobileKey)).toEqual([200, 200, 429]);
    expect(await statuses(gateway, from('198.51.100.1'), 3, webKey)).toEqual([200, 200, 429]);
    expect(await statuses(gateway, from('198.51.100.2'), 3, mobileKey)).toEqual([200, 200, 429]);
  });

  it("answer each caller's own count on the usage path", async () => {
    const gateway = await gatewayWith({ ...store(), trustProxy: ['127.0.0.1'] });
    await systemBy(gateway, 'client', 5);
    await statuses(gateway, from('198.51.100.1'), 3);
    await statuses(gateway, from('198.51.100.2'), 1);
    const usedBy = async (address: string) => {
      const answer = await request(gateway.url, {
        path: '/_quotagate/usage',
        headers: { authorization: basicAuth(devKey), ...from(address) },
      });
      const body = JSON.parse(answer.body) as { restrictions: Array<{ used: number }> };
      return body.restrictions.map((reading) => reading.used);
    };
    expect(await usedBy('198.51.100.1')).toEqual([3]);
    expect(await usedBy('198.51.100.2')).toEqual([1]);
    expect(await usedBy('198.51.100.3')).toEqual([0]);
    // The admin API's usage: the busiest caller's count, and how many callers are counted.
    expect((await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]).toMatchObject({
      by: 'client',
      callers: 2,
      used: 3,
    });
  });
});
