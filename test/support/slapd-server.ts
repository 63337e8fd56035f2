import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'ldapts';
import { dockerIsAvailable } from './docker.js';
import { freePort } from './free-port.js';
import { findExecutable, startServer, waitUntilReady } from './local-server.js';

export interface LdapFixture {
  url: string;
  baseDn: string;
  adminDn: string;
  adminPassword: string;
  peopleDn: string;
  groupsDn: string;
  users: Array<{ uid: string; password: string; dn: string }>;
}

export type LdapService = LdapFixture & { stop(): Promise<void> };

const BASE_DN = 'dc=example,dc=org';
const ADMIN_DN = `cn=admin,${BASE_DN}`;
const ADMIN_PASSWORD = 'admin-password';

const SEED_USERS = [
  { uid: 'alice', password: 'alice-password' },
  { uid: 'bob', password: 'bob-password' },
  // Filter metacharacters in a uid catch code that builds LDAP filters without escaping.
  { uid: 'o*brien(x)', password: 'obrien-password' },
];

const SEED_GROUPS = [
  { cn: 'api-users', members: ['alice'] },
  { cn: 'readers', members: ['alice', 'bob'] },
];

/**
 * Uses an existing directory if LDAP_URL is set, else a throwaway local slapd, else a Docker
 * container. An existing directory must already hold the seed data (see `seedLdif`) and is
 * described by:
 *   LDAP_URL             e.g. ldap://localhost:389
 *   LDAP_BASE_DN         default dc=example,dc=org
 *   LDAP_ADMIN_DN        default cn=admin,<LDAP_BASE_DN>
 *   LDAP_ADMIN_PASSWORD  required
 */
export async function startSlapd(): Promise<LdapService> {
  const url = process.env['LDAP_URL'];
  if (url) return { ...fixtureFromEnv(url), stop: async () => {} };
  const [slapd, slapadd] = await Promise.all([findExecutable('slapd'), findExecutable('slapadd')]);
  if (slapd && slapadd) return startLocalSlapd(slapd, slapadd);
  if (await dockerIsAvailable()) return startSlapdContainer();
  throw new Error(
    'slapd for tests: set LDAP_URL, or install slapd (apt-get install -y slapd ldap-utils), or run a Docker engine',
  );
}

function fixtureFromEnv(url: string): LdapFixture {
  const baseDn = process.env['LDAP_BASE_DN'] ?? BASE_DN;
  const adminPassword = process.env['LDAP_ADMIN_PASSWORD'];
  if (adminPassword === undefined) throw new Error('LDAP_URL is set, so LDAP_ADMIN_PASSWORD must be set too');
  return ldapFixture(url, baseDn, process.env['LDAP_ADMIN_DN'] ?? `cn=admin,${baseDn}`, adminPassword);
}

function ldapFixture(url: string, baseDn: string, adminDn: string, adminPassword: string): LdapFixture {
  const peopleDn = `ou=people,${baseDn}`;
  return {
    url,
    baseDn,
    adminDn,
    adminPassword,
    peopleDn,
    groupsDn: `ou=groups,${baseDn}`,
    users: SEED_USERS.map(({ uid, password }) => ({ uid, password, dn: userDn(uid, peopleDn) })),
  };
}

// `*` and parentheses are special in filters but not in DNs (RFC 4514), so no escaping is needed.
function userDn(uid: string, peopleDn: string): string {
  return `uid=${uid},${peopleDn}`;
}

// Only ever loaded under BASE_DN, which the first entry spells out.
function seedLdif(fixture: LdapFixture): string {
  const entries = [
    [
      `dn: ${fixture.baseDn}`,
      'objectClass: dcObject',
      'objectClass: organization',
      'dc: example',
      'o: Example',
    ],
    [`dn: ${fixture.peopleDn}`, 'objectClass: organizationalUnit', 'ou: people'],
    [`dn: ${fixture.groupsDn}`, 'objectClass: organizationalUnit', 'ou: groups'],
    ...fixture.users.map(({ uid, password, dn }) => [
      `dn: ${dn}`,
      'objectClass: inetOrgPerson',
      `uid: ${uid}`,
      `cn: ${uid}`,
      `sn: ${uid}`,
      `userPassword: ${password}`,
    ]),
    ...SEED_GROUPS.map(({ cn, members }) => [
      `dn: cn=${cn},${fixture.groupsDn}`,
      'objectClass: groupOfNames',
      `cn: ${cn}`,
      ...members.map((uid) => `member: ${userDn(uid, fixture.peopleDn)}`),
    ]),
  ];
  return entries.map((lines) => `${lines.join('\n')}\n`).join('\n');
}

function slapdConf(dir: string, fixture: LdapFixture): string {
  return [
    ...['core', 'cosine', 'inetorgperson', 'nis'].map(
      (schema) => `include /etc/ldap/schema/${schema}.schema`,
    ),
    'modulepath /usr/lib/ldap',
    'moduleload back_mdb',
    `pidfile "${join(dir, 'slapd.pid')}"`,
    // Keeps per-operation stats out of the host's syslog; startup errors still reach stderr.
    'loglevel 0',
    'database mdb',
    `suffix "${fixture.baseDn}"`,
    `rootdn "${fixture.adminDn}"`,
    `rootpw ${fixture.adminPassword}`,
    `directory "${join(dir, 'db')}"`,
    // Like a real directory: passwords can be bound with but not read.
    'access to attrs=userPassword by anonymous auth by * none',
    'access to * by * read',
    '',
  ].join('\n');
}

async function startLocalSlapd(slapd: string, slapadd: string): Promise<LdapService> {
  const dir = await mkdtemp(join(tmpdir(), 'quotagate-slapd-'));
  const removeDir = (): Promise<void> => rm(dir, { recursive: true, force: true });
  try {
    const fixture = ldapFixture(`ldap://127.0.0.1:${await freePort()}`, BASE_DN, ADMIN_DN, ADMIN_PASSWORD);
    const conf = await createDatabase(dir, fixture, slapadd);
    // `-d none` keeps slapd in the foreground, quiet while serving, but still prints startup
    // failures; `-d 0` would also stay in the foreground but send those failures only to syslog.
    const args = ['-f', conf, '-h', fixture.url, '-d', 'none'];
    const server = await startServer('slapd', slapd, args, () => canBind(fixture));
    return {
      ...fixture,
      stop: async () => {
        await server.stop();
        await removeDir();
      },
    };
  } catch (error) {
    await removeDir();
    throw error;
  }
}

/** Writes slapd.conf, loads the seed with slapadd and returns the config path. */
async function createDatabase(dir: string, fixture: LdapFixture, slapadd: string): Promise<string> {
  const conf = join(dir, 'slapd.conf');
  const ldif = join(dir, 'seed.ldif');
  await mkdir(join(dir, 'db'));
  await writeFile(conf, slapdConf(dir, fixture));
  await writeFile(ldif, seedLdif(fixture));
  await promisify(execFile)(slapadd, ['-f', conf, '-l', ldif]);
  return conf;
}

async function canBind(fixture: LdapFixture): Promise<boolean> {
  const client = new Client({ url: fixture.url, connectTimeout: 1_000, timeout: 1_000 });
  try {
    await client.bind(fixture.adminDn, fixture.adminPassword);
    return true;
  } catch {
    return false;
  } finally {
    await client.unbind();
  }
}

// bitnami/openldap left Docker Hub in 2025; the frozen bitnamilegacy copy is still public.
const OPENLDAP_IMAGE = 'bitnamilegacy/openldap:2.6';
const OPENLDAP_PORT = 1389;

async function startSlapdContainer(): Promise<LdapService> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const seed = ldapFixture('', BASE_DN, ADMIN_DN, ADMIN_PASSWORD);
  const container = await new GenericContainer(OPENLDAP_IMAGE)
    .withEnvironment({
      LDAP_ROOT: BASE_DN,
      LDAP_ADMIN_USERNAME: 'admin',
      LDAP_ADMIN_PASSWORD: ADMIN_PASSWORD,
      LDAP_CUSTOM_LDIF_DIR: '/ldifs',
    })
    .withCopyContentToContainer([{ content: seedLdif(seed), target: '/ldifs/seed.ldif' }])
    .withExposedPorts(OPENLDAP_PORT)
    // The image loads the seed through a temporary slapd; only the final one prints this.
    .withWaitStrategy(Wait.forLogMessage(/slapd starting/))
    .start();
  const fixture = { ...seed, url: `ldap://${container.getHost()}:${container.getMappedPort(OPENLDAP_PORT)}` };
  const stop = async (): Promise<void> => {
    await container.stop();
  };
  try {
    await waitUntilReady('OpenLDAP container', () => canBind(fixture));
  } catch (error) {
    await stop();
    throw error;
  }
  return { ...fixture, stop };
}
