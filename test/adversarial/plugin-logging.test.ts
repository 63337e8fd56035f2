import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * README, Logging: "Credentials never reach the log: … Authorization, APIKey, cookies, passwords and keys
 * are redacted from anything logged"; Authentication, plugin: "An error a plugin throws … is logged
 * without the credentials it may quote". An auth plugin is given the gateway's logger, and plugins log
 * what they look at: the request's fields, the request itself, and errors that quote the credentials they
 * decoded.
 */

const secret = 'config-shared-secret-7d1f-2b9c';
const bearer = 'Bearer tok-7Hq2';
const cookie = 'sid=s3ss10n-Zx81';
const password = 'Tr0ub4dor&3';

/** A plugin that logs like plugins do, then passes X-Secret holders and fails on Basic credentials. */
const pluginSource = `
module.exports = class LoggingPlugin {
  static configKeys = ['secret'];
  constructor(server) {
    this.logger = server.logger;
    this.secret = server.config.secret;
  }
  getSwaggerSecurity() {
    return {
      securityDefinitions: { 'X-Secret': { type: 'apiKey', name: 'X-Secret', in: 'header' } },
      security: [{ 'X-Secret': [] }],
    };
  }
  validateRequest(req) {
    if (req.headers['x-log'] === 'headers') this.logger.info({ headers: req.headers }, 'checking headers');
    if (req.headers['x-log'] === 'req') this.logger.info({ req }, 'checking request');
    const authorization = req.headers.authorization || '';
    if (authorization.startsWith('Basic ')) {
      const [user, pass] = Buffer.from(authorization.slice(6), 'base64').toString().split(':');
      throw new Error('directory refused ' + user + ' with password ' + pass);
    }
    return req.headers['x-secret'] === this.secret;
  }
};
`;

let upstream: TestUpstream;
let gateway: TestGateway;
let pluginDir: string;

beforeAll(async () => {
  upstream = await startUpstream();
  pluginDir = mkdtempSync(path.join(tmpdir(), 'quotagate-plugin-'));
  const pluginPath = path.join(pluginDir, 'logging-plugin.js');
  writeFileSync(pluginPath, pluginSource);
  gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, { APIKeyAuthType: 'plugin', APIKeyAuthPlugin: pluginPath, secret }),
  );
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
  rmSync(pluginDir, { recursive: true, force: true });
});

/** Log lines written since `from` (a count of lines) that contain `text`. */
const lineCount = () => gateway.rawLogs().split('\n').length;
const linesWith = (text: string, from: number) =>
  gateway
    .rawLogs()
    .split('\n')
    .slice(from)
    .filter((line) => line.includes(text));

describe('credentials an auth plugin logs through the logger it is given', () => {
  it("never writes the config's secret when the plugin logs the request's fields", async () => {
    const from = lineCount();
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { 'x-secret': secret, 'x-log': 'headers' },
    });
    expect(res.status).toBe(200);
    expect(linesWith('checking headers', from)).toHaveLength(1);
    expect(linesWith(secret, from)).toEqual([]);
  });

  it('never writes Authorization, cookies or the secret when the plugin logs the request', async () => {
    const from = lineCount();
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { 'x-secret': secret, authorization: bearer, cookie, 'x-log': 'req' },
    });
    expect(res.status).toBe(200);
    expect(linesWith('checking request', from)).toHaveLength(1);
    for (const credential of [secret, bearer, 'tok-7Hq2', 's3ss10n-Zx81']) {
      expect(linesWith(credential, from), credential).toEqual([]);
    }
  });

  it('takes the Basic password the plugin decoded out of the error it fails with', async () => {
    const authorization = `Basic ${Buffer.from(`alice:${password}`).toString('base64')}`;
    const from = lineCount();
    const res = await request(gateway.url, { path: '/pets/1', headers: { authorization } });
    expect(res.status).toBe(500);
    expect(linesWith('the auth plugin failed', from)).toHaveLength(1);
    expect(linesWith(password, from)).toEqual([]);
  });
});
