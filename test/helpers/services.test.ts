import { Redis } from 'ioredis';
import { Client, InvalidCredentialsError, escapeFilter, type Entry } from 'ldapts';
import { describe, expect, inject, it } from 'vitest';
import type { LdapFixture } from './slapd-server.js';

const ldap = inject('ldap');

function seededUser(uid: string): LdapFixture['users'][number] {
  const user = ldap.users.find((candidate) => candidate.uid === uid);
  if (!user) throw new Error(`No seeded user ${uid}`);
  return user;
}

async function withLdapClient<T>(use: (client: Client) => Promise<T>): Promise<T> {
  return withClient(new Client({ url: ldap.url }), use);
}

async function searchAsAdmin(base: string, filter: string, attributes: string[] = []): Promise<Entry[]> {
  return withLdapClient(async (client) => {
    await client.bind(ldap.adminDn, ldap.adminPassword);
    const { searchEntries } = await client.search(base, { scope: 'sub', filter, attributes });
    return searchEntries;
  });
}

function sortedValues(value: Entry[string] | undefined): string[] {
  return [value ?? []].flat().map(String).sort();
}

// The throwaway slapd and the Docker container always serve TLS; a directory given by LDAP_URL
// does so only if LDAPS_URL / LDAP_CA_FILE say how (see startSlapd).
const { ldapsUrl, caCert } = ldap;

function required<T>(value: T | undefined, name: string): T {
  if (value === undefined) throw new Error(`The LDAP fixture has no ${name}`);
  return value;
}

// Node's codes for a certificate chain that ends in no trusted CA; the first is a self-signed one.
const UNTRUSTED_CERTIFICATE_CODES =
  /^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|UNABLE_TO_VERIFY_LEAF_SIGNATURE)$/;

async function withClient<T>(client: Client, use: (client: Client) => Promise<T>): Promise<T> {
  try {
    return await use(client);
  } finally {
    await client.unbind();
  }
}

describe('test services', () => {
  it('provides a Redis server that answers PING', async () => {
    const redis = new Redis(inject('redisUrl'));
    try {
      expect(await redis.ping()).toBe('PONG');
    } finally {
      await redis.quit();
    }
  });

  it('provides a slapd with the seeded users', async () => {
    const alice = seededUser('alice');

    const entries = await searchAsAdmin(ldap.baseDn, '(uid=alice)');
    expect(entries.map((entry) => entry.dn)).toEqual([alice.dn]);

    await withLdapClient((client) => client.bind(alice.dn, alice.password));
    await withLdapClient(async (client) => {
      await expect(client.bind(alice.dn, 'wrong-password')).rejects.toBeInstanceOf(InvalidCredentialsError);
    });
  });

  it('seeds a user whose uid contains LDAP filter metacharacters', async () => {
    const obrien = seededUser('o*brien(x)');

    const entries = await searchAsAdmin(ldap.peopleDn, escapeFilter`(uid=${obrien.uid})`);
    expect(entries.map((entry) => entry.dn)).toEqual([obrien.dn]);

    await withLdapClient((client) => client.bind(obrien.dn, obrien.password));
  });

  it('seeds groups with members', async () => {
    const [alice, bob] = [seededUser('alice'), seededUser('bob')];

    const groups = await searchAsAdmin(ldap.groupsDn, '(objectClass=groupOfNames)', ['cn', 'member']);
    const membersByGroup = Object.fromEntries(
      groups.map((group) => [String(group['cn']), sortedValues(group['member'])]),
    );
    expect(membersByGroup).toEqual({
      'api-users': [alice.dn],
      readers: [alice.dn, bob.dn].sort(),
    });
  });

  it.skipIf(ldapsUrl === undefined || caCert === undefined)(
    'serves ldaps:// to a client that trusts its certificate',
    async () => {
      const alice = seededUser('alice');
      const client = new Client({
        url: required(ldapsUrl, 'ldapsUrl'),
        tlsOptions: { ca: [required(caCert, 'caCert')] },
      });

      await withClient(client, async () => {
        await client.bind(alice.dn, alice.password);
        expect(client.isBound).toBe(true);
      });
    },
  );

  // A directory that needs caCert has a certificate Node's own trust store cannot vouch for.
  it.skipIf(ldapsUrl === undefined || caCert === undefined)(
    'rejects an ldaps:// client that does not trust the certificate',
    async () => {
      const alice = seededUser('alice');
      const client = new Client({ url: required(ldapsUrl, 'ldapsUrl') });

      await withClient(client, async () => {
        await expect(client.bind(alice.dn, alice.password)).rejects.toMatchObject({
          code: expect.stringMatching(UNTRUSTED_CERTIFICATE_CODES),
        });
        expect(client.isConnected).toBe(false);
      });
    },
  );

  it.skipIf(caCert === undefined)('upgrades ldap:// with StartTLS', async () => {
    const alice = seededUser('alice');
    const client = new Client({ url: ldap.url });

    await withClient(client, async () => {
      await client.startTLS({ ca: [required(caCert, 'caCert')] });
      await client.bind(alice.dn, alice.password);
      expect(client.isBound).toBe(true);
    });
  });
});
