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
  const client = new Client({ url: ldap.url });
  try {
    return await use(client);
  } finally {
    await client.unbind();
  }
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
});
