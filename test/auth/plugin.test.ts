import net from 'node:net';
import { rmSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSchemeAuthenticator } from '../../src/auth/create-authenticator.js';
import { ConfigError } from '../../src/kit/config-error.js';
import { loadConfig } from '../../src/config/load-config.js';
import { createLogger } from '../../src/observe/log.js';
import { request } from '../helpers/raw-http.js';
import {
  memberUser,
  petsConfig,
  startTestGateway,
  userAuth,
  writeConfigDir,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const unauthorizedBody = '{"id":"com.vendor.api.unauthorized","message":"Unauthorized","success":false}';

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(() => upstream.close());

const gateways: TestGateway[] = [];
afterEach(async () => {
  for (const gateway of gateways.splice(0)) await gateway.close();
});

async function pluginGateway(plugin: string, extra: Record<string, unknown> = {}): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig(upstream.url, { APIKeyAuthType: 'plugin', APIKeyAuthPlugin: plugin, ...extra }),
  );
  gateways.push(gateway);
  return gateway;
}

const accessLines = (gateway: TestGateway) => gateway.logs.filter((line) => line.msg === 'request');

const lastAccess = async (gateway: TestGateway) => {
  await new Promise((resolve) => setImmediate(resolve));
  return accessLines(gateway).at(-1);
};

describe('plugin scheme: the three forms of validateRequest', () => {
  it('takes the synchronous form, with the config (and its extra keys) given to the constructor', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/sync-plugin.js', {
      requiredHeaderValue: 'open',
    });
    expect((await request(gateway.url, { path: '/pets/1', headers: { 'x-pass': 'open' } })).status).toBe(200);
    const refused = await request(gateway.url, { path: '/pets/1', headers: { 'x-pass': 'nope' } });
    expect(refused.status).toBe(401);
    expect(refused.body).toBe(unauthorizedBody);
  });

  it('counts the caller the plugin names in req.application', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/sync-plugin.js', {
      requiredHeaderValue: 'open',
    });
    await request(gateway.url, { path: '/pets/1', headers: { 'x-pass': 'open', 'x-app': 'mobile' } });
    expect(await lastAccess(gateway)).toMatchObject({ subject: 'mobile', status: 200 });
  });

  it('takes the callback form when validateRequest declares three parameters, naming req.user', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/callback-plugin.js');
    expect((await request(gateway.url, { path: '/pets/1', headers: { 'x-pass': 'yes' } })).status).toBe(200);
    expect(await lastAccess(gateway)).toMatchObject({ subject: 'carol' });
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(401);
  });

  it('answers 500 JSON and logs an error when the callback reports an error', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/callback-plugin.js');
    const res = await request(gateway.url, { path: '/pets/1', headers: { 'x-fail': '1' } });
    expect(res.status).toBe(500);
    expect(JSON.parse(res.body).id).toBe('com.vendor.api.internal_error');
    expect(gateway.logs.some((line) => line.level === 50 && line.msg === 'the auth plugin failed')).toBe(
      true,
    );
  });

  it('accepts a Promise from an ESM default-exported plugin, and 500 when it rejects', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/promise-plugin.mjs');
    expect((await request(gateway.url, { path: '/pets/1', headers: { 'x-pass': 'yes' } })).status).toBe(200);
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(401);
    expect((await request(gateway.url, { path: '/pets/1', headers: { 'x-throw': '1' } })).status).toBe(500);
  });

  it('answers 500 when a synchronous validateRequest throws', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/throwing-plugin.js');
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(500);
  });
});

describe('plugin scheme: matchURL, timeouts, own answers', () => {
  it('passes a URL the plugin does not match unauthenticated, and logs it as such', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/match-url-plugin.js');
    expect((await request(gateway.url, { path: '/pets/public' })).status).toBe(200);
    expect(await lastAccess(gateway)).toMatchObject({ unvalidated: true, subject: null });
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(401);
  });

  it('answers 503 when the plugin does not decide within pluginTimeout', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/silent-plugin.js', { pluginTimeout: 200 });
    const before = upstream.requests.length;
    const started = Date.now();
    const res = await request(gateway.url, { path: '/pets/1' });
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body).id).toBe('com.vendor.api.service_unavailable');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(upstream.requests.length).toBe(before);
  });

  it('does not forward a request whose client left while the plugin was deciding', async () => {
    const held: Array<() => void> = [];
    (globalThis as { quotagateHeld?: Array<() => void> }).quotagateHeld = held;
    const gateway = await pluginGateway('./test/fixtures/plugins/held-plugin.js');
    expect((await request(gateway.url, { path: '/pets/7' })).status).toBe(200);
    const idleSocket = upstream.requests.at(-1)!.socket;
    const client = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
    client.write('GET /pets/7 HTTP/1.1\r\nHost: gw\r\nX-Hold: 1\r\n\r\n');
    while (held.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const logged = accessLines(gateway).length;
    client.destroy();
    while (accessLines(gateway).length === logged) await new Promise((resolve) => setImmediate(resolve));
    const before = upstream.requests.length;
    held[0]!();
    // A request sent after the release reaches the upstream after anything the release sent, and on the
    // idle keep-alive connection: nothing forwarded for the departed client holds that one busy.
    expect((await request(gateway.url, { path: '/pets/8' })).status).toBe(200);
    expect(upstream.requests.slice(before).map((seen) => seen.url)).toEqual(['/8']);
    expect(upstream.requests.at(-1)!.socket).toBe(idleSocket);
  });

  it('leaves the answer to a plugin that already answered through res', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/answering-plugin.js');
    const res = await request(gateway.url, { path: '/pets/1' });
    expect(res).toMatchObject({ status: 403, body: 'go away' });
  });
});

describe('plugin scheme: the seed sample X-Secret plugin', () => {
  const secret = 'a-long-shared-secret-0123456789';

  it('rejects a request without the matching X-Secret and passes one with it', async () => {
    const gateway = await pluginGateway('./examples/plugins/x-secret.js', { secret });
    const missing = await request(gateway.url, { path: '/pets/1' });
    expect(missing.status).toBe(401);
    expect(missing.body).toBe(unauthorizedBody);
    expect((await request(gateway.url, { path: '/pets/1', headers: { 'x-secret': 'wrong' } })).status).toBe(
      401,
    );
    expect((await request(gateway.url, { path: '/pets/1', headers: { 'x-secret': secret } })).status).toBe(
      200,
    );
  });

  it('describes its Swagger security in the OpenAPI document of the proxied APIs', async () => {
    const gateway = await pluginGateway('./examples/plugins/x-secret.js', { secret });
    const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/apis/openapi.json`, {
      headers: { authorization: userAuth(memberUser) },
    });
    const document = (await res.json()) as {
      components: { securitySchemes: Record<string, unknown> };
      security: unknown[];
    };
    expect(document.components.securitySchemes['X-Secret']).toMatchObject({
      type: 'apiKey',
      name: 'X-Secret',
      in: 'header',
    });
    expect(document.security).toEqual([{ 'X-Secret': [] }]);
  });

  it('adds its credential to a console test request through applyCredentialsForTest', async () => {
    const configDir = writeConfigDir(
      petsConfig(upstream.url, {
        APIKeyAuthType: 'plugin',
        APIKeyAuthPlugin: './examples/plugins/x-secret.js',
        secret,
      }),
    );
    const loaded = await loadConfig({ configDir, env: {} });
    rmSync(configDir, { recursive: true, force: true });
    const authenticator = await createSchemeAuthenticator(loaded.config.APIKeyAuthType, loaded, {
      logger: createLogger({ level: 'silent' }),
      cwd: process.cwd(),
    });
    const options: Record<string, unknown> = { headers: { accept: 'application/json' } };
    authenticator.documentation.applyCredentialsForTest?.(options);
    expect(options.headers).toEqual({ accept: 'application/json', 'X-Secret': secret });
  });
});

describe('plugin scheme: loading mistakes fail the start naming APIKeyAuthPlugin', () => {
  it.each([
    [
      './test/fixtures/plugins/missing.js',
      /^APIKeyAuthPlugin: cannot load '\.\/test\/fixtures\/plugins\/missing\.js': /,
    ],
    ['quotagate-no-such-plugin', /^APIKeyAuthPlugin: cannot load 'quotagate-no-such-plugin': /],
    ['./test/fixtures/plugins/not-a-class.js', /^APIKeyAuthPlugin: '.*' must export a plugin class$/],
    [
      './test/fixtures/plugins/no-validate-request.js',
      /^APIKeyAuthPlugin: '.*' has no validateRequest method/,
    ],
    [
      './test/fixtures/plugins/failing-constructor.js',
      /^APIKeyAuthPlugin: constructing '.*' failed: missing settings$/,
    ],
  ])('%s', async (plugin, message) => {
    const failure = await pluginGateway(plugin).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ConfigError);
    expect((failure as ConfigError).problems[0]).toMatch(message);
  });
});
