import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'ldapts';
import selfsigned from 'selfsigned';
import { dockerIsAvailable } from './docker.js';
import { freePorts } from './free-port.js';
import { findExecutable, startServer, waitUntilReady } from './local-server.js';

export interface LdapFixture {
  /** Plain ldap://, which also accepts StartTLS wherever `caCert` is set. */
  url: string;
  /**
   * The same directory over ldaps://. Always set for the throwaway slapd and the Docker
   * container; with LDAP_URL it comes from LDAPS_URL and is absent when that is unset.
   */
  ldapsUrl?: string;
  /**
   * PEM certificate that clients must trust for ldaps:// and StartTLS (the servers here use a
   * fresh self-signed one). Always set for the throwaway slapd and the Docker container; with
   * LDAP_URL it is read from the file LDAP_CA_FILE names and is absent when that is unset.
   */
  caCert?: string;
  baseDn: string;
  adminDn: string;
  adminPassword: string;
  peopleDn: string;
  groupsDn: string;
  users: Array<{ uid: string; password: string; dn: string }>;
}

export type LdapService = LdapFixture & { stop(): Promise<void> };

/** The `ldap` settings of a gateway on `directory`, finding users by uid under its people. */
export const ldapSettingsOf = (directory: LdapFixture) => ({
  url: directory.url,
  adminDn: directory.adminDn,
  adminPassword: directory.adminPassword,
  searchBase: directory.peopleDn,
  searchFilter: '(uid={{username}})',
});

const BASE_DN = 'dc=example,dc=org';
const ADMIN_DN = `cn=admin,${BASE_DN}`;
const ADMIN_PASSWORD = 'admin-password';

const SEED_USERS: Array<{ uid: string; password: string; moreAttributes?: string[] }> = [
  { uid: 'alice', password: 'alice-password' },
  { uid: 'bob', password: 'bob-password' },
  // Filter metacharacters in a uid catch code that builds LDAP filters without escaping.
  { uid: 'o*brien(x)', password: 'obrien-password' },
  // Two values of uid: one entry found by two names, whose uid cannot name it alone.
  { uid: 'carol', password: 'carol-password', moreAttributes: ['uid: carol.smith'] },
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
 *   LDAPS_URL            optional, e.g. ldaps://localhost:636; sets `ldapsUrl`
 *   LDAP_CA_FILE         optional PEM file of the CA that signed the directory's certificate;
 *                        sets `caCert`, needed for ldaps:// and StartTLS
 */
export async function startSlapd(): Promise<LdapService> {
  const url = process.env['LDAP_URL'];
  if (url) return { ...(await fixtureFromEnv(url)), stop: async () => {} };
  const [slapd, slapadd] = await Promise.all([findExecutable('slapd'), findExecutable('slapadd')]);
  if (slapd && slapadd) return startLocalSlapd(slapd, slapadd);
  if (await dockerIsAvailable()) return startSlapdContainer();
  throw new Error(
    'slapd for tests: set LDAP_URL, or install slapd (apt-get install -y slapd ldap-utils), or run a Docker engine',
  );
}

async function fixtureFromEnv(url: string): Promise<LdapFixture> {
  const baseDn = process.env['LDAP_BASE_DN'] ?? BASE_DN;
  const adminPassword = process.env['LDAP_ADMIN_PASSWORD'];
  if (adminPassword === undefined) throw new Error('LDAP_URL is set, so LDAP_ADMIN_PASSWORD must be set too');
  const fixture = ldapFixture(
    url,
    baseDn,
    process.env['LDAP_ADMIN_DN'] ?? `cn=admin,${baseDn}`,
    adminPassword,
  );
  const ldapsUrl = process.env['LDAPS_URL'] || undefined;
  const caFile = process.env['LDAP_CA_FILE'] || undefined;
  const caCert = caFile === undefined ? undefined : await readFile(caFile, 'utf8');
  return { ...fixture, ...(ldapsUrl && { ldapsUrl }), ...(caCert && { caCert }) };
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
      ...(SEED_USERS.find((user) => user.uid === uid)?.moreAttributes ?? []),
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

interface TlsFiles {
  certFile: string;
  keyFile: string;
}

function slapdConf(dir: string, fixture: LdapFixture, tls: TlsFiles): string {
  return [
    ...['core', 'cosine', 'inetorgperson', 'nis'].map(
      (schema) => `include /etc/ldap/schema/${schema}.schema`,
    ),
    'modulepath /usr/lib/ldap',
    'moduleload back_mdb',
    `pidfile "${join(dir, 'slapd.pid')}"`,
    // Keeps per-operation stats out of the host's syslog; startup errors still reach stderr.
    'loglevel 0',
    // Serves ldaps:// and StartTLS; slapd refuses to start if it cannot load these.
    `TLSCertificateFile "${tls.certFile}"`,
    `TLSCertificateKeyFile "${tls.keyFile}"`,
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
    const [ldapPort, ldapsPort] = await freePorts(2);
    const fixture = {
      ...ldapFixture(`ldap://127.0.0.1:${ldapPort}`, BASE_DN, ADMIN_DN, ADMIN_PASSWORD),
      ldapsUrl: `ldaps://127.0.0.1:${ldapsPort}`,
    };
    const tls = { certFile: join(dir, 'tls-cert.pem'), keyFile: join(dir, 'tls-key.pem') };
    // The key is generated while slapadd loads the seed; only slapd itself reads the files.
    const [conf, caCert] = await Promise.all([
      createDatabase(dir, fixture, tls, slapadd),
      writeCertificate(tls, LOCAL_HOST_NAMES),
    ]);
    // `-d none` keeps slapd in the foreground, quiet while serving, but still prints startup
    // failures; `-d 0` would also stay in the foreground but send those failures only to syslog.
    const args = ['-f', conf, '-h', `${fixture.url} ${fixture.ldapsUrl}`, '-d', 'none'];
    const server = await startServer('slapd', slapd, args, () => canBind(fixture));
    return {
      ...fixture,
      caCert,
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
async function createDatabase(
  dir: string,
  fixture: LdapFixture,
  tls: TlsFiles,
  slapadd: string,
): Promise<string> {
  const conf = join(dir, 'slapd.conf');
  const ldif = join(dir, 'seed.ldif');
  await mkdir(join(dir, 'db'));
  await writeFile(conf, slapdConf(dir, fixture, tls));
  await writeFile(ldif, seedLdif(fixture));
  await promisify(execFile)(slapadd, ['-f', conf, '-l', ldif]);
  return conf;
}

const LOCAL_HOST_NAMES = ['localhost', '127.0.0.1'];

/**
 * Creates a self-signed server certificate for `hostNames` (the first is its common name) and
 * returns the certificate PEM, which clients trust as their CA. Node checks a StartTLS upgrade of
 * ldapts against the name "localhost", so that must be among `hostNames`.
 *
 * An ECDSA P-256 key in PKCS#8 PEM loads in Debian's GnuTLS-built slapd (2.5) as well as in the
 * OpenSSL-built one in the container image, and takes milliseconds to generate where RSA 2048
 * added about a quarter of a second to every test run.
 */
async function selfSignedCertificate(hostNames: readonly string[]): Promise<{ cert: string; key: string }> {
  const [commonName = 'localhost'] = hostNames;
  const pems = await selfsigned.generate([{ name: 'commonName', value: commonName }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [...new Set(hostNames)].map((name) =>
          isIP(name) === 0 ? { type: 2, value: name } : { type: 7, ip: name },
        ),
      },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

/** Writes a fresh self-signed certificate and its key (owner-only) and returns the certificate. */
async function writeCertificate(files: TlsFiles, hostNames: readonly string[]): Promise<string> {
  const { cert, key } = await selfSignedCertificate(hostNames);
  await Promise.all([writeFile(files.certFile, cert), writeFile(files.keyFile, key, { mode: 0o600 })]);
  return cert;
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
const OPENLDAPS_PORT = 1636;
const OPENLDAP_CERT = '/opt/bitnami/openldap/certs/tls-cert.pem';
const OPENLDAP_KEY = '/opt/bitnami/openldap/certs/tls-key.pem';

async function startSlapdContainer(): Promise<LdapService> {
  const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
  // The certificate must name the host clients dial, which is the runtime's (maybe remote) host.
  const host = (await getContainerRuntimeClient()).info.containerRuntime.host;
  const { cert, key } = await selfSignedCertificate([...LOCAL_HOST_NAMES, host]);
  const seed = ldapFixture('', BASE_DN, ADMIN_DN, ADMIN_PASSWORD);
  const container = await new GenericContainer(OPENLDAP_IMAGE)
    .withEnvironment({
      LDAP_ROOT: BASE_DN,
      LDAP_ADMIN_USERNAME: 'admin',
      LDAP_ADMIN_PASSWORD: ADMIN_PASSWORD,
      LDAP_CUSTOM_LDIF_DIR: '/ldifs',
      // Adds ldaps:// on LDAP_LDAPS_PORT_NUMBER; StartTLS on the plain port works as well.
      LDAP_ENABLE_TLS: 'yes',
      LDAP_LDAPS_PORT_NUMBER: String(OPENLDAPS_PORT),
      LDAP_TLS_CERT_FILE: OPENLDAP_CERT,
      LDAP_TLS_KEY_FILE: OPENLDAP_KEY,
      // The image insists on a CA file; a self-signed certificate is its own CA.
      LDAP_TLS_CA_FILE: OPENLDAP_CERT,
    })
    .withCopyContentToContainer([
      { content: seedLdif(seed), target: '/ldifs/seed.ldif' },
      { content: cert, target: OPENLDAP_CERT, mode: 0o644 },
      // slapd in the image runs as an unprivileged user, which must be able to read the key.
      { content: key, target: OPENLDAP_KEY, mode: 0o644 },
    ])
    .withExposedPorts(OPENLDAP_PORT, OPENLDAPS_PORT)
    // The image loads the seed through a temporary slapd; only the final one prints this.
    .withWaitStrategy(Wait.forLogMessage(/slapd starting/))
    .start();
  const fixture = {
    ...seed,
    url: `ldap://${container.getHost()}:${container.getMappedPort(OPENLDAP_PORT)}`,
    ldapsUrl: `ldaps://${container.getHost()}:${container.getMappedPort(OPENLDAPS_PORT)}`,
    caCert: cert,
  };
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
