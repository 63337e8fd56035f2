import { rmSync } from 'node:fs';
import https from 'node:https';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  prodKey,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { createTestCertificate, type TestCertificate } from '../helpers/tls-cert.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const mobileAppId = '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
const mobileDevKey = 'mobile-dev-key-0123456789abcdef0123';
const mobileProdKey = 'mobile-prod-key-0123456789abcdef012';
const applications = [
  { id: mobileAppId, name: 'Mobile', apikey_development: mobileDevKey, apikey_production: mobileProdKey },
];
const unauthorizedBody = '{"id":"com.vendor.api.unauthorized","message":"Unauthorized","success":false}';

let upstream: TestUpstream;
let certificate: TestCertificate;
beforeAll(async () => {
  upstream = await startUpstream();
  certificate = await createTestCertificate();
});
afterAll(async () => {
  await upstream.close();
  rmSync(certificate.dir, { recursive: true, force: true });
});

const gateways: TestGateway[] = [];
afterEach(async () => {
  for (const gateway of gateways.splice(0)) await gateway.close();
});

async function gatewayWith(
  overrides: Record<string, unknown>,
  env: NodeJS.ProcessEnv = {},
): Promise<TestGateway> {
  const gateway = await startTestGateway(petsConfig(upstream.url, { applications, ...overrides }), env);
  gateways.push(gateway);
  return gateway;
}

const lastSubject = async (gateway: TestGateway) => {
  await new Promise((resolve) => setImmediate(resolve));
  return gateway.logs.filter((line) => line.msg === 'request').at(-1)?.subject;
};

describe('basic scheme: keys per environment and applications', () => {
  it('accepts an application key and identifies that application', async () => {
    const gateway = await gatewayWith({});
    expect(
      (await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(mobileDevKey) } }))
        .status,
    ).toBe(200);
    expect(await lastSubject(gateway)).toBe(mobileAppId);
    await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(devKey) } });
    expect(await lastSubject(gateway)).toBe('project');
  });

  it('still refuses near misses of a key it has already accepted', async () => {
    const gateway = await gatewayWith({});
    const status = async (key: string) =>
      (await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(key) } })).status;
    expect(await status(devKey)).toBe(200);
    expect(await status(devKey)).toBe(200);
    for (const near of [devKey.slice(0, -1), `${devKey}x`, devKey.toUpperCase(), ` ${devKey}`])
      expect(await status(near)).toBe(401);
  });

  it('uses the production keys when NODE_ENV=production and rejects the development ones', async () => {
    // Production refuses plain admin passwords, so this gateway has no admin users.
    const gateway = await gatewayWith(
      { admin: { host: '127.0.0.1', port: 0, users: [] } },
      { NODE_ENV: 'production' },
    );
    const status = async (key: string) =>
      (await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(key) } })).status;
    expect(await status(prodKey)).toBe(200);
    expect(await status(mobileProdKey)).toBe(200);
    expect(await status(devKey)).toBe(401);
    expect(await status(mobileDevKey)).toBe(401);
  });
});

describe('apikey scheme', () => {
  const tls = () => ({ port: 0, key: certificate.keyFile, cert: certificate.certFile });

  function httpsRequest(
    gateway: TestGateway,
    headers: Record<string, string | string[]>,
  ): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      https
        .get(
          {
            host: '127.0.0.1',
            port: gateway.running.ports.https,
            path: '/pets/1',
            ca: certificate.cert,
            headers,
          },
          (res) => {
            let body = '';
            res.on('data', (chunk) => (body += chunk));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        )
        .on('error', reject);
    });
  }

  it('accepts the APIKey header over HTTPS and does not forward it', async () => {
    const gateway = await gatewayWith({ APIKeyAuthType: 'apikey', tls: tls() });
    expect(await httpsRequest(gateway, { apikey: devKey })).toMatchObject({ status: 200 });
    expect(upstream.requests.at(-1)!.headers.apikey).toBeUndefined();
    expect(await httpsRequest(gateway, { APIKey: mobileDevKey })).toMatchObject({ status: 200 });
    expect(await lastSubject(gateway)).toBe(mobileAppId);
  });

  it.each([
    ['no key', {}],
    ['an unknown key', { apikey: 'unknown-key-0123456789abcdef' }],
    ['the production key in development', { apikey: prodKey }],
    ['two APIKey headers', { apikey: [devKey, devKey] }],
  ])('rejects %s with 401 and the seed body', async (_case, headers) => {
    const gateway = await gatewayWith({ APIKeyAuthType: 'apikey', tls: tls() });
    expect(await httpsRequest(gateway, headers)).toEqual({ status: 401, body: unauthorizedBody });
  });

  const overPlainHttpBody =
    '{"id":"com.vendor.api.unauthorized","message":"Unauthorized: API keys are accepted over HTTPS only (this is the plain-HTTP port)","success":false}';

  it('rejects a valid key that arrives on the plain-HTTP listener, says why, and never forwards it', async () => {
    const gateway = await gatewayWith({ APIKeyAuthType: 'apikey', tls: tls() });
    const before = upstream.requests.length;
    const res = await request(gateway.url, { path: '/pets/1', headers: { apikey: devKey } });
    expect(res).toMatchObject({ status: 401, body: overPlainHttpBody });
    expect(upstream.requests.length).toBe(before);
    await new Promise((resolve) => setImmediate(resolve));
    expect(gateway.logs.filter((line) => line.msg === 'request').at(-1)).toMatchObject({
      status: 401,
      reason: 'https_required',
    });
  });

  it('says the same to a request without a key on the plain-HTTP listener, and nothing of it over HTTPS', async () => {
    const gateway = await gatewayWith({ APIKeyAuthType: 'apikey', tls: tls() });
    expect(await request(gateway.url, { path: '/pets/1' })).toMatchObject({
      status: 401,
      body: overPlainHttpBody,
    });
    expect(await httpsRequest(gateway, {})).toEqual({ status: 401, body: unauthorizedBody });
    await new Promise((resolve) => setImmediate(resolve));
    expect(gateway.logs.filter((line) => line.msg === 'request').at(-1)).not.toHaveProperty('reason');
  });
});

describe('none scheme', () => {
  it('accepts every request, with no application', async () => {
    const gateway = await gatewayWith({ APIKeyAuthType: 'none' });
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(200);
    expect(await lastSubject(gateway)).toBeNull();
  });
});
