import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  adminUser,
  applicationDefaultQuotaId,
  petsConfig,
  setQuota,
  startTestGateway,
  throttle,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const ldap = inject('ldap');
const alice = ldap.users.find((user) => user.uid === 'alice')!;

/** Ten ways of typing alice's name, all of which the directory matches to her one entry. */
const spellings = [
  'alice',
  'ALICE',
  'Alice',
  'aLiCe',
  'AlIcE',
  'alicE',
  'alice ',
  '  alice',
  ' ALICE ',
  'ａｌｉｃｅ',
];

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(() => upstream.close());

const gateways: TestGateway[] = [];
afterEach(async () => {
  for (const gateway of gateways.splice(0)) await gateway.close();
});

const clock = { now: 1_800_000_000_000 };

async function ldapGateway(ldapOverrides: Record<string, unknown>): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig(upstream.url, {
      APIKeyAuthType: 'ldap',
      ldap: {
        url: ldap.url,
        adminDn: ldap.adminDn,
        adminPassword: ldap.adminPassword,
        searchBase: ldap.peopleDn,
        searchFilter: '(uid={{username}})',
        ...ldapOverrides,
      },
    }),
    {},
    { clock: () => clock.now },
  );
  gateways.push(gateway);
  return gateway;
}

describe('ldap identity through a started gateway', () => {
  it.each([
    ['the DN, without a cache', {}],
    ['the DN, with the session cache', { cache: true }],
    ['identityAttribute uid, with the session cache', { identityAttribute: 'uid', cache: true }],
  ])(
    'counts ten spellings of one user against one Application Default quota of 2 a minute (%s)',
    async (_label, ldapOverrides) => {
      expect(new Set(spellings).size).toBe(10);
      const gateway = await ldapGateway(ldapOverrides);
      await setQuota(
        gateway,
        {
          type: 'APPLICATION',
          name: 'Default',
          restrictions: [throttle(2, 1, 'minute')],
        },
        applicationDefaultQuotaId,
      );
      const before = upstream.requests.length;
      const statuses: number[] = [];
      for (const spelling of spellings) {
        const authorization = `Basic ${Buffer.from(`${spelling}:${alice.password}`, 'utf8').toString('base64')}`;
        statuses.push((await request(gateway.url, { path: '/pets/1', headers: { authorization } })).status);
      }
      expect(statuses).toEqual([200, 200, 429, 429, 429, 429, 429, 429, 429, 429]);
      expect(upstream.requests.length - before).toBe(2);
    },
  );

  it("gives one user a quota of their own by the entry's DN, whichever way they spell their name", async () => {
    const gateway = await ldapGateway({});
    const dn = `uid=alice,${ldap.peopleDn}`;
    const res = await fetch(
      `${gateway.adminUrl}/api/portal/v1.3/applications/${encodeURIComponent(dn)}/quota`,
      {
        method: 'POST',
        headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
        body: JSON.stringify({
          type: 'APPLICATION',
          name: 'Alice',
          restrictions: [throttle(1, 1, 'minute')],
        }),
      },
    );
    expect(res.status).toBe(201);
    const statuses: number[] = [];
    for (const spelling of ['alice', 'ALICE ']) {
      const authorization = `Basic ${Buffer.from(`${spelling}:${alice.password}`, 'utf8').toString('base64')}`;
      statuses.push((await request(gateway.url, { path: '/pets/1', headers: { authorization } })).status);
    }
    expect(statuses).toEqual([200, 429]);
  });
});
