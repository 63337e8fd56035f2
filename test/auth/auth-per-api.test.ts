import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  rsaKey,
  signToken,
  startJwksServer,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwks-server.js';
import { request } from '../helpers/raw-http.js';
import {
  applicationDefaultQuotaId,
  basicAuth,
  devKey,
  petsApiId,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const issuer = 'https://idp.example/realms/test';
const audience = 'pets-api';
const bearerChallenge = 'Bearer realm="quotagate"';
const publicApiId = '3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a98';

/**
 * Pets under the top-level jwt, its `status` method public; a public API at /public; a partners API whose
 * own scheme is basic.
 */
const petsApi = (upstream: string) => ({
  id: petsApiId,
  name: 'Pet Store',
  basePath: '/pets',
  upstream,
  methods: [
    { id: 'c4d2a9e3-71b8-4c6f-9e0d-2a5b8f1c3d32', name: 'getPet', verb: 'GET', path: '/{petId}' },
    {
      id: '1d2c3b4a-5f6e-4a7b-8c9d-0e1f2a3b4c5e',
      name: 'status',
      verb: 'GET',
      path: '/status',
      auth: 'none',
    },
  ],
});
const publicApi = (upstream: string) => ({
  id: publicApiId,
  name: 'Public',
  basePath: '/public',
  upstream,
  auth: 'none',
  methods: [{ id: '6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d', name: 'docs', verb: 'GET', path: '/docs' }],
});
const partnersApi = (upstream: string) => ({
  id: '7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2918',
  name: 'Partners',
  basePath: '/partners',
  upstream,
  auth: 'basic',
  methods: [{ id: '8f7e6d5c-4b3a-4291-8a0f-9e8d7c6b5a49', name: 'orders', verb: 'GET', path: '/orders' }],
});

let key: SigningKey;
let jwks: JwksServer;
let upstream: TestUpstream;
beforeAll(async () => {
  key = await rsaKey('key-1');
  jwks = await startJwksServer([key.publicJwk]);
  upstream = await startUpstream();
});
afterAll(async () => {
  await jwks.close();
  await upstream.close();
});

const gateways: TestGateway[] = [];
afterEach(async () => {
  jwks.down = false;
  for (const gateway of gateways.splice(0)) await gateway.close();
});

async function gateway(): Promise<TestGateway> {
  const started = await startTestGateway(
    petsConfig(upstream.url, {
      APIKeyAuthType: 'jwt',
      jwt: { jwksUri: jwks.url, issuer, audience },
      apis: [petsApi(upstream.url), publicApi(upstream.url), partnersApi(upstream.url)],
    }),
  );
  gateways.push(started);
  return started;
}

const get = (gateway: TestGateway, path: string, headers: Record<string, string> = {}) =>
  request(gateway.url, { path, headers });
const token = () => signToken(key, { iss: issuer, aud: audience, sub: 'user-1', client_id: 'app-a' });
const lastAccessLine = async (gateway: TestGateway) => {
  await new Promise((resolve) => setImmediate(resolve));
  return gateway.logs.filter((line) => line.msg === 'request').at(-1);
};

describe('authentication per API and per method', () => {
  it('answers a public API and a public method without credentials, with no application', async () => {
    const gw = await gateway();
    const before = upstream.requests.length;
    expect((await get(gw, '/public/docs')).status).toBe(200);
    expect(await lastAccessLine(gw)).toMatchObject({ application: null, status: 200 });
    expect((await get(gw, '/pets/status')).status).toBe(200);
    expect(await lastAccessLine(gw)).toMatchObject({ application: null, status: 200 });
    expect(upstream.requests.slice(before).map((seen) => seen.url)).toEqual(['/docs', '/status']);
  });

  it('keeps the top-level scheme on every other operation of the API', async () => {
    const gw = await gateway();
    const refused = await get(gw, '/pets/1');
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe(bearerChallenge);
    expect((await get(gw, '/pets/1', { authorization: `Bearer ${await token()}` })).status).toBe(200);
    expect(await lastAccessLine(gw)).toMatchObject({ application: 'app-a' });
  });

  it("takes an API's own scheme instead of the top-level one, and only that scheme", async () => {
    const gw = await gateway();
    expect((await get(gw, '/partners/orders', { authorization: basicAuth(devKey) })).status).toBe(200);
    const bearer = await get(gw, '/partners/orders', { authorization: `Bearer ${await token()}` });
    expect(bearer.status).toBe(401);
    expect(bearer.headers['www-authenticate']).toBe('Basic realm="quotagate", charset="UTF-8"');
    // The key of the basic scheme opens nothing under the top-level jwt.
    expect((await get(gw, '/pets/1', { authorization: basicAuth(devKey) })).status).toBe(401);
  });

  it('authenticates a path spelled through a public one as the protected operation it reaches', async () => {
    const gw = await gateway();
    const before = upstream.requests.length;
    for (const path of [
      '/public/../pets/1',
      '/public/%2e%2e/pets/1',
      '/public/%2E%2E/pets/1',
      '/PUBLIC/../PETS/1',
      '/pets/status/../1',
      '/pets/STATUS/%2e%2e/1',
      '/pets/status/./../1',
    ]) {
      const res = await get(gw, path);
      expect(res.status, path).toBe(401);
      expect(res.headers['www-authenticate'], path).toBe(bearerChallenge);
    }
    expect(upstream.requests.length).toBe(before);
  });

  it('answers its public operations while the JWKS of the top-level jwt is down', async () => {
    jwks.down = true;
    const gw = await gateway();
    expect((await get(gw, '/public/docs')).status).toBe(200);
    expect((await get(gw, '/pets/status')).status).toBe(200);
    expect((await get(gw, '/pets/1', { authorization: `Bearer ${await token()}` })).status).toBe(503);
  });

  it('counts public requests against API restrictions by client, and never against application ones', async () => {
    const gw = await gateway();
    await setQuota(
      gw,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(1, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    await setQuota(
      gw,
      {
        type: 'API',
        name: 'System',
        restrictions: [throttle(3, 1, 'minute', { api: publicApiId, by: 'client' })],
      },
      systemQuotaId,
    );
    const statuses = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await get(gw, '/public/docs')).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    // The application default holds one request a minute: the public method is not counted by it.
    expect([(await get(gw, '/pets/status')).status, (await get(gw, '/pets/status')).status]).toEqual([
      200, 200,
    ]);
  });
});

describe('a plugin that only an API names', () => {
  it('is loaded and constructed with its own keys, and authenticates that API alone', async () => {
    const started = await startTestGateway(
      petsConfig(upstream.url, {
        APIKeyAuthPlugin: './examples/plugins/x-secret.js',
        secret: 'a-long-random-shared-secret',
        apis: [petsApi(upstream.url), { ...partnersApi(upstream.url), auth: 'plugin' }],
      }),
    );
    gateways.push(started);
    expect(
      (await get(started, '/partners/orders', { 'x-secret': 'a-long-random-shared-secret' })).status,
    ).toBe(200);
    expect((await get(started, '/partners/orders', { 'x-secret': 'wrong' })).status).toBe(401);
    expect((await get(started, '/partners/orders', { authorization: basicAuth(devKey) })).status).toBe(401);
    // The rest keeps APIKeyAuthType (basic here), which the plugin's secret does not open.
    expect((await get(started, '/pets/1', { 'x-secret': 'a-long-random-shared-secret' })).status).toBe(401);
    expect((await get(started, '/pets/1', { authorization: basicAuth(devKey) })).status).toBe(200);
  });
});
