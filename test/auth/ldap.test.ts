import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import type { AuthResult } from '../../src/auth/authenticator.js';
import { createLdapAuthenticator } from '../../src/auth/ldap-authenticator.js';
import type { Config } from '../../src/config/schema.js';
import { createLogger } from '../../src/log.js';
import { startAuthProbe } from '../helpers/auth-probe.js';
import { request } from '../helpers/raw-http.js';
import { startSilentServer, startTcpRelay, type TcpRelay } from '../helpers/tcp-relay.js';
import { freePort } from '../support/free-port.js';

type LdapSettings = NonNullable<Config['ldap']>;

const ldap = inject('ldap');
const logger = createLogger({ level: 'silent' });
const basic = (username: string, password: string) =>
  `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
const password = (uid: string) => ldap.users.find((user) => user.uid === uid)!.password;

function settings(overrides: Partial<LdapSettings> = {}): LdapSettings {
  return {
    url: ldap.url,
    adminDn: ldap.adminDn,
    adminPassword: ldap.adminPassword,
    searchBase: ldap.peopleDn,
    searchFilter: '(uid={{username}})',
    startTLS: false,
    cache: false,
    timeout: 2000,
    ...overrides,
  };
}

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

/** Authenticates one request with these credentials through a real HTTP exchange. */
async function authenticate(
  ldapSettings: LdapSettings,
  authorization: string | undefined,
  now?: () => number,
): Promise<AuthResult> {
  const probe = await startAuthProbe(
    createLdapAuthenticator(ldapSettings, { logger, ...(now ? { now } : {}) }),
  );
  stops.push(() => probe.close());
  const res = await request(probe.url, { path: '/', headers: authorization ? { authorization } : {} });
  return JSON.parse(res.body) as AuthResult;
}

const unauthorized = {
  ok: false,
  reject: 'unauthorized',
  challenge: 'Basic realm="quotagate", charset="UTF-8"',
};

describe('ldap scheme against a real slapd', () => {
  it('accepts a user with the right password, as an application keyed by the username', async () => {
    expect(await authenticate(settings(), basic('alice', password('alice')))).toEqual({
      ok: true,
      principal: { subject: 'alice', application: 'alice' },
    });
  });

  it('rejects a wrong password, an unknown user and missing credentials', async () => {
    expect(await authenticate(settings(), basic('alice', 'wrong'))).toEqual(unauthorized);
    expect(await authenticate(settings(), basic('nobody', 'whatever'))).toEqual(unauthorized);
    expect(await authenticate(settings(), undefined)).toEqual(unauthorized);
  });

  it('searches anonymously when there is no adminPassword', async () => {
    const { adminPassword: _unused, ...anonymous } = settings();
    expect(await authenticate(anonymous, basic('bob', password('bob')))).toMatchObject({ ok: true });
  });

  it('finds a user whose name holds filter metacharacters, and only that user', async () => {
    expect(await authenticate(settings(), basic('o*brien(x)', password('o*brien(x)')))).toMatchObject({
      ok: true,
      principal: { subject: 'o*brien(x)' },
    });
  });

  it.each(['*', 'a)(uid=*', '*)(|(objectClass=*', 'a\u0000b', 'alice)(uid=bob', '*lice'])(
    'rejects the injection username %j, never binding as another user',
    async (username) => {
      expect(await authenticate(settings(), basic(username, password('alice')))).toEqual(unauthorized);
    },
  );

  it('looks up groups with {{dn}} escaped, and the groups travel with the principal', async () => {
    const result = await authenticate(
      settings({
        groupSearchBase: ldap.groupsDn,
        groupSearchFilter: '(&(objectClass=groupOfNames)(member={{dn}}))',
      }),
      basic('alice', password('alice')),
    );
    expect(result).toMatchObject({ ok: true, principal: { subject: 'alice' } });
    const groups = (result as { principal: { groups: string[] } }).principal.groups;
    expect(groups.map((dn) => dn.split(',')[0]).sort()).toEqual(['cn=api-users', 'cn=readers']);
  });

  it('rejects a search filter that matches several entries (two users for one name) with 401', async () => {
    const result = await authenticate(
      settings({ searchFilter: '(|(uid={{username}})(uid=bob))' }),
      basic('alice', password('alice')),
    );
    expect(result).toEqual(unauthorized);
  });
});

describe('ldap scheme: calls it must not make', () => {
  let relay: TcpRelay;
  beforeAll(async () => {
    const target = new URL(ldap.url);
    relay = await startTcpRelay({ host: target.hostname, port: Number(target.port) });
  });
  afterAll(() => relay.close());

  it('rejects an empty password before any LDAP call (it would be an anonymous bind)', async () => {
    const before = relay.connections();
    expect(
      await authenticate(settings({ url: `ldap://127.0.0.1:${relay.port}` }), basic('alice', '')),
    ).toEqual(unauthorized);
    expect(await authenticate(settings({ url: `ldap://127.0.0.1:${relay.port}` }), basic('', 'x'))).toEqual(
      unauthorized,
    );
    expect(relay.connections()).toBe(before);
  });

  it('serves a repeated login from the cache, but never a wrong password, and asks again after 5 minutes', async () => {
    let now = 1_000_000;
    const clock = () => now;
    const cached = settings({ url: `ldap://127.0.0.1:${relay.port}`, cache: true });
    const probe = await startAuthProbe(createLdapAuthenticator(cached, { logger, now: clock }));
    stops.push(() => probe.close());
    const login = async (pass: string) =>
      JSON.parse(
        (await request(probe.url, { path: '/', headers: { authorization: basic('alice', pass) } })).body,
      ) as AuthResult;

    const start = relay.connections();
    expect(await login(password('alice'))).toMatchObject({ ok: true });
    expect(relay.connections()).toBe(start + 1);
    expect(await login(password('alice'))).toMatchObject({ ok: true });
    expect(relay.connections()).toBe(start + 1);

    expect(await login('wrong-password')).toEqual(unauthorized);
    expect(relay.connections()).toBe(start + 2);

    now += 5 * 60_000 + 1;
    expect(await login(password('alice'))).toMatchObject({ ok: true });
    expect(relay.connections()).toBe(start + 3);
  });
});

describe('ldap scheme: a directory that is down or silent', () => {
  it('answers 503 at once when nothing listens', async () => {
    const url = `ldap://127.0.0.1:${await freePort()}`;
    expect(await authenticate(settings({ url }), basic('alice', password('alice')))).toEqual({
      ok: false,
      reject: 'service_unavailable',
    });
  });

  it('answers 503 within the timeout when the directory accepts and never answers', async () => {
    const silent = await startSilentServer();
    stops.push(() => silent.close());
    const started = Date.now();
    const result = await authenticate(
      settings({ url: `ldap://127.0.0.1:${silent.port}`, timeout: 300 }),
      basic('alice', password('alice')),
    );
    const elapsed = Date.now() - started;
    expect(result).toEqual({ ok: false, reject: 'service_unavailable' });
    expect(silent.connections()).toBe(1);
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(1500);
  });

  it('answers 503 when the admin bind is refused (a config mistake), never an accept', async () => {
    const result = await authenticate(
      settings({ adminPassword: 'not-the-admin-password' }),
      basic('alice', password('alice')),
    );
    expect(result).toEqual({ ok: false, reject: 'service_unavailable' });
  });
});

describe('ldap scheme over TLS: tlsOptions reach the TLS connect', () => {
  const alice = () => basic('alice', password('alice'));
  const tls = ldap.ldapsUrl && ldap.caCert ? { ldapsUrl: ldap.ldapsUrl, ca: ldap.caCert } : null;

  it.runIf(tls)('binds over ldaps:// when tlsOptions trust the directory certificate', async () => {
    expect(
      await authenticate(settings({ url: tls!.ldapsUrl, tlsOptions: { ca: [tls!.ca] } }), alice()),
    ).toMatchObject({
      ok: true,
    });
  });

  it.runIf(tls)('answers 503 over ldaps:// when the certificate is not trusted (no tlsOptions)', async () => {
    expect(await authenticate(settings({ url: tls!.ldapsUrl }), alice())).toEqual({
      ok: false,
      reject: 'service_unavailable',
    });
  });

  it.runIf(tls)('upgrades ldap:// with startTLS and the same tlsOptions', async () => {
    const upgraded = settings({ startTLS: true, tlsOptions: { ca: [tls!.ca], servername: 'localhost' } });
    expect(await authenticate(upgraded, alice())).toMatchObject({ ok: true });
    expect(await authenticate(settings({ startTLS: true }), alice())).toEqual({
      ok: false,
      reject: 'service_unavailable',
    });
  });
});
