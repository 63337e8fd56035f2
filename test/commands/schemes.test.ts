import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import { spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import { basicAuth, devKey, petsConfig, writeSeedConfigDir } from '../helpers/test-gateway.js';
import { createTestCertificate, type TestCertificate } from '../helpers/tls-cert.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { ldapSettingsOf } from '../helpers/slapd-server.js';

let upstream: TestUpstream;
let certificate: TestCertificate;
const dirs: string[] = [];

beforeAll(async () => {
  upstream = await startUpstream();
  certificate = await createTestCertificate();
});
afterAll(async () => {
  await upstream.close();
  for (const dir of [...dirs, certificate.dir]) rmSync(dir, { recursive: true, force: true });
});

interface Started {
  cli: CliProcess;
  http: string;
  https?: number;
}

/** Runs `gateway start` on a conf/default.js in the seed's format; `cwd` is the project folder. */
async function start(overrides: Record<string, unknown>, cwd = process.cwd()): Promise<Started> {
  const dir = writeSeedConfigDir(petsConfig(upstream.url, overrides));
  dirs.push(dir);
  const cli = spawnCli(['start', '--config-dir', dir], { cwd });
  const ports = await startedPorts(cli);
  return { cli, http: `http://127.0.0.1:${ports.http}`, ...(ports.https ? { https: ports.https } : {}) };
}

async function stop({ cli }: Started): Promise<void> {
  cli.child.kill('SIGTERM');
  expect((await cli.exited).code).toBe(0);
}

const status = async (base: string, headers: Record<string, string> = {}) =>
  (await request(base, { path: '/pets/1', headers })).status;

describe('every scheme through gateway start', () => {
  it('none: accepts everyone', async () => {
    const gateway = await start({ APIKeyAuthType: 'none' });
    expect(await status(gateway.http)).toBe(200);
    await stop(gateway);
  });

  it('basic: the key as username', async () => {
    const gateway = await start({ APIKeyAuthType: 'basic' });
    expect(await status(gateway.http, { authorization: basicAuth(devKey) })).toBe(200);
    expect(await status(gateway.http)).toBe(401);
    await stop(gateway);
  });

  it('apikey: the APIKey header over HTTPS', async () => {
    const gateway = await start({
      APIKeyAuthType: 'apikey',
      tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
    });
    const httpsStatus = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        https
          .get(
            { host: '127.0.0.1', port: gateway.https, path: '/pets/1', ca: certificate.cert, headers },
            (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            },
          )
          .on('error', reject);
      });
    expect(await httpsStatus({ apikey: devKey })).toBe(200);
    expect(await httpsStatus({})).toBe(401);
    await stop(gateway);
  });

  it('ldap: directory credentials', async () => {
    const ldap = inject('ldap');
    const alice = ldap.users.find((user) => user.uid === 'alice')!;
    const gateway = await start({
      APIKeyAuthType: 'ldap',
      ldap: ldapSettingsOf(ldap),
    });
    const credentials = (password: string) => `Basic ${Buffer.from(`alice:${password}`).toString('base64')}`;
    expect(await status(gateway.http, { authorization: credentials(alice.password) })).toBe(200);
    expect(await status(gateway.http, { authorization: credentials('wrong') })).toBe(401);
    await stop(gateway);
  });

  it('plugin: the X-Secret example by path', async () => {
    const secret = 'a-long-shared-secret-0123456789';
    const gateway = await start({
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: './examples/plugins/x-secret.js',
      secret,
    });
    expect(await status(gateway.http, { 'x-secret': secret })).toBe(200);
    expect(await status(gateway.http)).toBe(401);
    expect(gateway.cli.stdout()).not.toContain(secret);
    await stop(gateway);
  });

  it('plugin: an installed package, by name, from the project folder', async () => {
    const project = mkdtempSync(path.join(tmpdir(), 'quotagate-project-'));
    dirs.push(project);
    const pkg = path.join(project, 'node_modules', 'acme-auth-plugin');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(path.join(pkg, 'package.json'), '{"name":"acme-auth-plugin","main":"index.js"}');
    writeFileSync(
      path.join(pkg, 'index.js'),
      "module.exports = class { validateRequest(req) { return req.headers['x-acme'] === 'ok'; } };\n",
    );
    const gateway = await start({ APIKeyAuthType: 'plugin', APIKeyAuthPlugin: 'acme-auth-plugin' }, project);
    expect(await status(gateway.http, { 'x-acme': 'ok' })).toBe(200);
    expect(await status(gateway.http)).toBe(401);
    await stop(gateway);
  });

  it('fails the start with exit 2 naming the key when a plugin cannot be loaded', async () => {
    const dir = writeSeedConfigDir(
      petsConfig(upstream.url, { APIKeyAuthType: 'plugin', APIKeyAuthPlugin: './no/such/plugin.js' }),
    );
    dirs.push(dir);
    const result = await spawnCli(['start', '--config-dir', dir]).exited;
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^APIKeyAuthPlugin: cannot load '\.\/no\/such\/plugin\.js': /);
  });
});
