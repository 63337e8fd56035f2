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
import { freePort } from '../helpers/free-port.js';
import { ldapSettingsOf } from '../helpers/slapd-server.js';

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
      ldap: { ...ldapSettingsOf(ldap), ...ldapOverrides },
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

describe('application quotas named through the directory', () => {
  const bob = ldap.users.find((user) => user.uid === 'bob')!;
  const portal = '/api/portal/v1.3';
  const admin = { authorization: userAuth(adminUser), 'content-type': 'application/json' };
  const ownQuota = { type: 'APPLICATION', name: 'Bob', restrictions: [throttle(1, 1, 'minute')] };
  const callAs = (gateway: TestGateway, username: string, password: string) =>
    request(gateway.url, {
      path: '/pets/1',
      headers: { authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` },
    }).then((answer) => answer.status);
  const quotaOf = (gateway: TestGateway, name: string, init: RequestInit = {}) =>
    fetch(`${gateway.adminUrl}${portal}/applications/${encodeURIComponent(name)}/quota`, {
      headers: admin,
      ...init,
    });

  it.each([
    ['the DN', {}],
    ['identityAttribute uid', { identityAttribute: 'uid' }],
  ])(
    'keeps a quota given to a login name under the identity the caller gets, which every name of the entry reads (%s)',
    async (_label, ldapOverrides) => {
      const gateway = await ldapGateway(ldapOverrides);
      const created = await quotaOf(gateway, 'BOB', { method: 'POST', body: JSON.stringify(ownQuota) });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      for (const name of ['bob', ` bob`, bob.dn, bob.dn.toUpperCase().replace(',', ', ')]) {
        const read = await quotaOf(gateway, name);
        expect(read.status, name).toBe(200);
        expect(((await read.json()) as { id: string }).id, name).toBe(id);
      }
      // A second quota for another name of the same entry is the same application's.
      expect(
        (await quotaOf(gateway, bob.dn, { method: 'POST', body: JSON.stringify(ownQuota) })).status,
      ).toBe(409);
      expect([
        await callAs(gateway, 'bob', bob.password),
        await callAs(gateway, 'Bob', bob.password),
      ]).toEqual([200, 429]);
    },
  );

  it('keeps the quota under the identity when only the API names ldap (APIKeyAuthType is basic)', async () => {
    const config = petsConfig(upstream.url, { ldap: ldapSettingsOf(ldap) });
    const [pets] = config.apis as Array<Record<string, unknown>>;
    pets!.auth = 'ldap';
    const gateway = await startTestGateway(config, {}, { clock: () => clock.now });
    gateways.push(gateway);
    const created = await quotaOf(gateway, 'BOB', { method: 'POST', body: JSON.stringify(ownQuota) });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const read = await quotaOf(gateway, bob.dn);
    expect(read.status).toBe(200);
    expect(((await read.json()) as { id: string }).id).toBe(id);
    expect([await callAs(gateway, 'bob', bob.password), await callAs(gateway, 'Bob', bob.password)]).toEqual([
      200, 429,
    ]);
    expect(
      (await quotaOf(gateway, 'nobody', { method: 'POST', body: JSON.stringify(ownQuota) })).status,
    ).toBe(404);
  });

  it('answers 404 for a name no entry has, and for a DN outside searchBase, and creates nothing', async () => {
    const gateway = await ldapGateway({});
    const before = (await (
      await fetch(`${gateway.adminUrl}${portal}/quotas`, { headers: admin })
    ).json()) as unknown[];
    for (const name of ['nobody', `uid=nobody,${ldap.peopleDn}`, ldap.adminDn, ldap.peopleDn, 'uid=bob']) {
      const answer = await quotaOf(gateway, name, { method: 'POST', body: JSON.stringify(ownQuota) });
      expect(answer.status, name).toBe(404);
      const { errors } = (await answer.json()) as { errors: Array<{ message: string }> };
      expect(errors[0]!.message, name).toContain(
        'name an LDAP caller by the name it logs in with, or by its DN',
      );
      expect((await quotaOf(gateway, name, { method: 'PUT', body: JSON.stringify(ownQuota) })).status).toBe(
        404,
      );
    }
    const after = (await (
      await fetch(`${gateway.adminUrl}${portal}/quotas`, { headers: admin })
    ).json()) as unknown[];
    expect(after).toHaveLength(before.length);
  });

  it('answers 503 while the directory cannot be reached, and creates nothing', async () => {
    const gateway = await ldapGateway({ url: `ldap://127.0.0.1:${await freePort()}`, timeout: 500 });
    const answer = await quotaOf(gateway, 'bob', { method: 'POST', body: JSON.stringify(ownQuota) });
    expect(answer.status).toBe(503);
    expect(await answer.json()).toEqual({
      errors: [
        { code: 503, message: 'the directory did not answer: which caller this names cannot be told' },
      ],
    });
  });
});
