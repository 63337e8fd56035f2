import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import type { AuthResult } from '../../src/auth/authenticator.js';
import { createLdapAuthenticator } from '../../src/auth/ldap-authenticator.js';
import type { Config } from '../../src/config/schema.js';
import { createLogger, type Logger } from '../../src/observe/log.js';
import { startAuthProbe } from '../helpers/auth-probe.js';
import { request } from '../helpers/raw-http.js';
import { startSilentServer, startTcpRelay, type TcpRelay } from '../helpers/tcp-relay.js';
import { freePort } from '../helpers/free-port.js';

type LdapSettings = NonNullable<Config['ldap']>;

const ldap = inject('ldap');
const logger = createLogger({ level: 'silent' });
const basic = (username: string, password: string) =>
  `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
const password = (uid: string) => ldap.users.find((user) => user.uid === uid)!.password;
const dnOf = (uid: string) => ldap.users.find((user) => user.uid === uid)!.dn;

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

const challenge = 'Basic realm="quotagate", charset="UTF-8"';
/** A refusal of credentials, and why (what the authentication span says, never the answer). */
const unauthorized = (cause: string) => ({ ok: false, reject: 'unauthorized', challenge, cause });

describe('ldap scheme against a real slapd', () => {
  it("accepts a user with the right password, as the application and subject the entry's DN names", async () => {
    expect(await authenticate(settings(), basic('alice', password('alice')))).toEqual({
      ok: true,
      principal: { subject: dnOf('alice'), application: dnOf('alice') },
    });
  });

  it('rejects a wrong password, an unknown user and missing credentials', async () => {
    expect(await authenticate(settings(), basic('alice', 'wrong'))).toEqual(unauthorized('bad_password'));
    expect(await authenticate(settings(), basic('nobody', 'whatever'))).toEqual(unauthorized('unknown_user'));
    expect(await authenticate(settings(), undefined)).toEqual(unauthorized('no_credentials'));
  });

  it('searches anonymously when there is no adminPassword', async () => {
    const { adminPassword: _unused, ...anonymous } = settings();
    expect(await authenticate(anonymous, basic('bob', password('bob')))).toMatchObject({ ok: true });
  });

  it('finds a user whose name holds filter metacharacters, and only that user', async () => {
    expect(await authenticate(settings(), basic('o*brien(x)', password('o*brien(x)')))).toMatchObject({
      ok: true,
      principal: { subject: dnOf('o*brien(x)') },
    });
  });

  it.each(['*', 'a)(uid=*', '*)(|(objectClass=*', 'a\u0000b', 'alice)(uid=bob', '*lice'])(
    'rejects the injection username %j, never binding as another user',
    async (username) => {
      expect(await authenticate(settings(), basic(username, password('alice')))).toEqual(
        unauthorized('unknown_user'),
      );
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
    expect(result).toMatchObject({ ok: true, principal: { subject: dnOf('alice') } });
    const groups = (result as { principal: { groups: string[] } }).principal.groups;
    expect(groups.map((dn) => dn.split(',')[0]).sort()).toEqual(['cn=api-users', 'cn=readers']);
  });

  it('rejects a search filter that matches several entries (two users for one name) with 401', async () => {
    const result = await authenticate(
      settings({ searchFilter: '(|(uid={{username}})(uid=bob))' }),
      basic('alice', password('alice')),
    );
    expect(result).toEqual(unauthorized('unknown_user'));
  });
});

/** Every way of typing alice's name that the directory matches to her entry (case, spaces, width). */
const aliceSpellings = ['alice', 'ALICE', 'Alice', 'aLiCe', 'alice ', '  alice', ' ALICE ', 'ａｌｉｃｅ'];

/** A logger whose lines the test reads. */
function capturedLogger(): { logger: Logger; lines: () => string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { logger: createLogger({ level: 'warn', destination }), lines: () => lines };
}

describe('ldap scheme: one identity per directory entry, whatever the spelling', () => {
  it("gives every spelling of a name the directory matches the same application and subject: the entry's DN", async () => {
    for (const spelling of aliceSpellings) {
      expect(await authenticate(settings(), basic(spelling, password('alice')))).toEqual({
        ok: true,
        principal: { subject: dnOf('alice'), application: dnOf('alice') },
      });
    }
  });

  it('gives every spelling the value of identityAttribute as the directory spells it', async () => {
    for (const spelling of aliceSpellings) {
      expect(
        await authenticate(settings({ identityAttribute: 'uid' }), basic(spelling, password('alice'))),
      ).toEqual({ ok: true, principal: { subject: 'alice', application: 'alice' } });
    }
  });

  it("gives the two names of one entry (two uid values) the same application: the entry's DN", async () => {
    for (const name of ['carol', 'carol.smith', 'Carol.Smith']) {
      expect(await authenticate(settings(), basic(name, password('carol')))).toEqual({
        ok: true,
        principal: { subject: dnOf('carol'), application: dnOf('carol') },
      });
    }
  });

  it('refuses with 401 an entry that lacks identityAttribute, never falling back to the name as typed', async () => {
    const { logger: log, lines } = capturedLogger();
    const probe = await startAuthProbe(
      createLdapAuthenticator(settings({ identityAttribute: 'mail' }), { logger: log }),
    );
    stops.push(() => probe.close());
    const login = async (pass: string) =>
      JSON.parse(
        (await request(probe.url, { path: '/', headers: { authorization: basic('alice', pass) } })).body,
      ) as AuthResult;

    expect(await login('wrong-password')).toEqual(unauthorized('bad_password'));
    expect(lines()).toEqual([]);
    expect(await login(password('alice'))).toEqual(unauthorized('no_identity'));
    expect(lines().map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual([
      'ldap entry refused: it has no identityAttribute',
    ]);
  });

  it('refuses with 401 an entry with several values of identityAttribute, and accepts one with a single value', async () => {
    const byUid = settings({ identityAttribute: 'uid' });
    for (const name of ['carol', 'carol.smith'])
      expect(await authenticate(byUid, basic(name, password('carol')))).toEqual(unauthorized('no_identity'));
    expect(await authenticate(byUid, basic('bob', password('bob')))).toEqual({
      ok: true,
      principal: { subject: 'bob', application: 'bob' },
    });
  });

  it('looks up groups with {{username}} as the identity, so every spelling gets the same groups', async () => {
    const withGroups = settings({
      identityAttribute: 'uid',
      groupSearchBase: ldap.groupsDn,
      groupSearchFilter: `(&(objectClass=groupOfNames)(member=uid={{username}},${ldap.peopleDn}))`,
    });
    for (const spelling of aliceSpellings) {
      const result = await authenticate(withGroups, basic(spelling, password('alice')));
      expect(result).toMatchObject({ ok: true, principal: { subject: 'alice' } });
      const groups = (result as { principal: { groups: string[] } }).principal.groups;
      expect(groups.map((dn) => dn.split(',')[0]).sort()).toEqual(['cn=api-users', 'cn=readers']);
    }
  });
});

describe('ldap scheme: the session cache holds one session per entry', () => {
  let relay: TcpRelay;
  beforeEach(async () => {
    const target = new URL(ldap.url);
    relay = await startTcpRelay({ host: target.hostname, port: Number(target.port) });
  });
  afterEach(() => relay.close());

  /** A cached authenticator that reaches the directory through the relay, and a login through it. */
  async function cachedLogin(overrides: Partial<LdapSettings> = {}) {
    const cached = settings({ url: `ldap://127.0.0.1:${relay.port}`, cache: true, ...overrides });
    const probe = await startAuthProbe(createLdapAuthenticator(cached, { logger, now: () => 1_000_000 }));
    stops.push(() => probe.close());
    return async (username: string, pass: string) =>
      JSON.parse(
        (await request(probe.url, { path: '/', headers: { authorization: basic(username, pass) } })).body,
      ) as AuthResult;
  }

  const directoryDown = { ok: false, reject: 'service_unavailable' };
  const asAlice = { ok: true, principal: { subject: dnOf('alice'), application: dnOf('alice') } };

  it("shares one session among all of a user's spellings, so 128 of them never push another user out of the cache", async () => {
    const login = await cachedLogin();
    expect(await login('bob', password('bob'))).toMatchObject({ ok: true });
    // 32 ways to case "alice", each with 0 to 3 leading spaces: more spellings than the 100 sessions.
    const spellings = Array.from({ length: 128 }, (_, i) => {
      const cased = [...'alice'].map((c, bit) => ((i >> bit) & 1 ? c.toUpperCase() : c)).join('');
      return ' '.repeat(i >> 5) + cased;
    });
    expect(new Set(spellings).size).toBe(128);
    for (const spelling of spellings) expect(await login(spelling, password('alice'))).toEqual(asAlice);

    await relay.close();
    expect(await login('bob', password('bob'))).toEqual({
      ok: true,
      principal: { subject: dnOf('bob'), application: dnOf('bob') },
    });
    for (const spelling of spellings) expect(await login(spelling, password('alice'))).toEqual(asAlice);
  });

  it('serves a spelling seen before from the session of its entry, but a wrong password always goes to the directory', async () => {
    const login = await cachedLogin();
    const start = relay.connections();
    expect(await login('alice', password('alice'))).toEqual(asAlice);
    expect(await login('ALICE', password('alice'))).toEqual(asAlice);
    expect(relay.connections()).toBe(start + 2);
    expect(await login('ALICE', password('alice'))).toEqual(asAlice);
    expect(await login('alice', password('alice'))).toEqual(asAlice);
    expect(relay.connections()).toBe(start + 2);

    expect(await login('ALICE', 'wrong-password')).toEqual(unauthorized('bad_password'));
    expect(await login('alice', 'wrong-password')).toEqual(unauthorized('bad_password'));
    expect(relay.connections()).toBe(start + 4);

    await relay.close();
    expect(await login('ALICE', password('alice'))).toEqual(asAlice);
    expect(await login('ALICE', 'wrong-password')).toEqual(directoryDown);
    expect(await login('Alice', password('alice'))).toEqual(directoryDown);
  });

  it('never lets a cached spelling or password authenticate as another entry', async () => {
    const login = await cachedLogin();
    expect(await login('alice', password('alice'))).toEqual(asAlice);
    expect(await login('bob', password('alice'))).toEqual(unauthorized('bad_password'));
    expect(await login('bob', password('bob'))).toEqual({
      ok: true,
      principal: { subject: dnOf('bob'), application: dnOf('bob') },
    });
    await relay.close();
    expect(await login('bob', password('alice'))).toEqual(directoryDown);
    expect(await login('alice', password('bob'))).toEqual(directoryDown);
    expect(await login('alice', password('alice'))).toEqual(asAlice);
  });

  it('keys sessions by the entry with identityAttribute too: every spelling is the one uid from the cache', async () => {
    const login = await cachedLogin({ identityAttribute: 'uid' });
    for (const spelling of aliceSpellings)
      expect(await login(spelling, password('alice'))).toEqual({
        ok: true,
        principal: { subject: 'alice', application: 'alice' },
      });
    await relay.close();
    for (const spelling of aliceSpellings)
      expect(await login(spelling, password('alice'))).toEqual({
        ok: true,
        principal: { subject: 'alice', application: 'alice' },
      });
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
    ).toEqual(unauthorized('no_credentials'));
    expect(await authenticate(settings({ url: `ldap://127.0.0.1:${relay.port}` }), basic('', 'x'))).toEqual(
      unauthorized('no_credentials'),
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

    expect(await login('wrong-password')).toEqual(unauthorized('bad_password'));
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
