import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createLogger } from '../../src/observe/log.js';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  prodKey,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

describe('credentials in logs', () => {
  let upstream: TestUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    upstream = await startUpstream();
    gateway = await startTestGateway(petsConfig(upstream.url));
  });

  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it('never writes keys or Authorization headers to the log, at debug level, accepted or rejected', async () => {
    const authorization = basicAuth(devKey);
    await request(gateway.url, { path: '/pets/1', headers: { authorization, apikey: devKey } });
    await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(prodKey) } });
    await request(gateway.url, { path: '/pets/%2f', headers: { authorization } });
    await new Promise((resolve) => setImmediate(resolve));
    const logs = gateway.rawLogs();
    expect(logs).toContain('"msg":"request"');
    for (const secret of [
      devKey,
      prodKey,
      authorization,
      authorization.slice(6),
      basicAuth(prodKey).slice(6),
    ]) {
      expect(logs).not.toContain(secret);
    }
  });

  it('takes a key out of the access line when a client sends it as its request id', async () => {
    await request(gateway.url, { path: '/pets/1', headers: { 'x-request-id': devKey } });
    await request(gateway.url, { path: '/pets/1', headers: { 'x-request-id': `${prodKey}.1` } });
    await new Promise((resolve) => setImmediate(resolve));
    const logs = gateway.rawLogs();
    expect(logs).toContain('"msg":"request"');
    expect(logs).not.toContain(devKey);
    expect(logs).not.toContain(prodKey);
  });

  it('never writes LDAP passwords to the log, accepted, rejected or with the directory down', async () => {
    const ldap = inject('ldap');
    const alice = ldap.users.find((user) => user.uid === 'alice')!;
    const ldapSettings = {
      url: ldap.url,
      adminDn: ldap.adminDn,
      adminPassword: ldap.adminPassword,
      searchBase: ldap.peopleDn,
      searchFilter: '(uid={{username}})',
    };
    const ldapGateway = await startTestGateway(
      petsConfig(upstream.url, { APIKeyAuthType: 'ldap', ldap: ldapSettings }),
    );
    const downGateway = await startTestGateway(
      petsConfig(upstream.url, {
        APIKeyAuthType: 'ldap',
        ldap: { ...ldapSettings, url: 'ldap://127.0.0.1:1' },
      }),
    );
    const credentials = (password: string) => ({
      authorization: `Basic ${Buffer.from(`alice:${password}`).toString('base64')}`,
    });
    expect(
      (await request(ldapGateway.url, { path: '/pets/1', headers: credentials(alice.password) })).status,
    ).toBe(200);
    expect(
      (await request(ldapGateway.url, { path: '/pets/1', headers: credentials('wrong-secret-pw') })).status,
    ).toBe(401);
    expect(
      (await request(downGateway.url, { path: '/pets/1', headers: credentials(alice.password) })).status,
    ).toBe(503);
    await ldapGateway.close();
    await downGateway.close();
    const logs = ldapGateway.rawLogs() + downGateway.rawLogs();
    expect(downGateway.rawLogs()).toContain('ldap directory did not answer');
    for (const secret of [alice.password, 'wrong-secret-pw', ldap.adminPassword])
      expect(logs).not.toContain(secret);
  });

  it('takes credentials out of the errors an auth plugin fails with, which may quote them', async () => {
    const secret = 'config-shared-secret-7d1f';
    const pluginGateway = await startTestGateway(
      petsConfig(upstream.url, {
        APIKeyAuthType: 'plugin',
        APIKeyAuthPlugin: './test/fixtures/plugins/quoting-plugin.js',
        secret,
      }),
    );
    const teamPass = 'hunter2-team';
    const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlMTIzNDU2Nzg5MA';
    const attempts: Array<Record<string, string>> = [
      { 'x-team-pass': teamPass },
      { 'x-mode': 'config' },
      { 'x-mode': 'bearer', 'x-token': `Bearer ${jwt}` },
    ];
    for (const headers of attempts) {
      expect((await request(pluginGateway.url, { path: '/pets/1', headers })).status).toBe(500);
    }
    await pluginGateway.close();
    const logs = pluginGateway.rawLogs();
    expect(logs).toContain('the auth plugin failed');
    expect(logs).toContain('team pass [REDACTED] is not on the list');
    for (const leaked of [teamPass, secret, jwt, jwt.split('.')[1]!]) expect(logs).not.toContain(leaked);
  });

  it('redacts credential fields of anything logged as an object', () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logger = createLogger({ level: 'info', destination });
    logger.info(
      {
        req: {
          headers: { authorization: 'Basic c2VjcmV0Og==', apikey: 'k-123', 'proxy-authorization': 'p' },
        },
        ldap: { adminPassword: 'ldap-secret' },
        user: { password: 'pw-secret' },
        config: { apikey_development: 'dev-secret', apikey_production: 'prod-secret' },
      },
      'object with secrets',
    );
    const line = lines.join('');
    for (const secret of ['c2VjcmV0Og==', 'k-123', 'ldap-secret', 'pw-secret', 'dev-secret', 'prod-secret']) {
      expect(line).not.toContain(secret);
    }
    expect(line).toContain('[REDACTED]');
  });
});
