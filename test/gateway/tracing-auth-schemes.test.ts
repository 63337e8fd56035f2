import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  rsaKey,
  signToken,
  startJwksServer,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwks-server.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { createTestCertificate, httpsGet } from '../helpers/tls-cert.js';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { spanKind, spanTexts, traceOf } from '../helpers/trace-trees.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const issuer = 'https://idp.example/realms/test';
const audience = 'pets-api';
const claims = (sub: string) => ({ iss: issuer, aud: audience, sub, client_id: 'app-a' });

let receiver: OtlpReceiver;
let upstream: TestUpstream;
let jwks: JwksServer;
let firstKey: SigningKey;
const gateways: TestGateway[] = [];
/** Every token and key a request carried: none may show in a span. */
const secrets: string[] = [devKey, basicAuth(devKey).slice('Basic '.length)];

const tracedGateway = async (overrides: Record<string, unknown>) => {
  const gateway = await startTestGateway(
    petsConfig(upstream.url, {
      ...overrides,
      tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 },
    }),
  );
  gateways.push(gateway);
  return gateway;
};

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream();
  firstKey = await rsaKey('key-1');
  jwks = await startJwksServer([firstKey.publicJwk]);
});

afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  await jwks?.close();
  await upstream?.close();
  await receiver?.close();
});

const get = (gateway: TestGateway, headers: Record<string, string> = {}) =>
  request(gateway.url, { path: '/pets/1', headers });

/** A token of `key` for a subject of its own, remembered as a secret (with its hash, which the cache keys). */
async function tokenOf(key: SigningKey, sub: string): Promise<string> {
  const token = await signToken(key, claims(sub));
  secrets.push(token, token.split('.')[2]!, createHash('sha256').update(token).digest('base64'));
  return token;
}

describe('the authentication span of the jwt scheme', () => {
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await tracedGateway({
      APIKeyAuthType: 'jwt',
      jwt: { jwksUri: jwks.url, issuer, audience },
    });
    // Whether the fetch at start is over or not, the keys of key-1 are known after this one.
    const warmUp = await tokenOf(firstKey, 'warm-up');
    expect((await get(gateway, { authorization: `Bearer ${warmUp}` })).status).toBe(200);
  });

  it('has the JWKS fetch a token of a new key waits on as its client span, and no fetch once the key is known', async () => {
    const rotated = await rsaKey('key-2');
    jwks.keys = [firstKey.publicJwk, rotated.publicJwk];
    const fetchesBefore = jwks.fetches;
    const token = await tokenOf(rotated, 'user-1');
    expect((await get(gateway, { authorization: `Bearer ${token}` })).status).toBe(200);
    expect(jwks.fetches).toBe(fetchesBefore + 1);
    const trace = await traceOf(gateway, receiver, 200);
    const authenticate = trace.one('quotagate.authenticate');
    expect(authenticate).toMatchObject({
      parentSpanId: trace.server.spanId,
      kind: spanKind.internal,
      attributes: {
        'quotagate.auth.scheme': 'jwt',
        'quotagate.auth.outcome': 'admitted',
        'quotagate.auth.cached': false,
      },
    });
    const url = new URL(jwks.url);
    expect(trace.childrenOf(authenticate)).toEqual([
      expect.objectContaining({
        name: 'GET',
        kind: spanKind.client,
        traceId: trace.server.traceId,
        status: { code: 0, message: '' },
        attributes: {
          'http.request.method': 'GET',
          'url.full': jwks.url,
          'server.address': url.hostname,
          'server.port': Number(url.port),
          'http.response.status_code': 200,
        },
      }),
    ]);

    // The same token again: the cache of verified tokens answers.
    expect((await get(gateway, { authorization: `Bearer ${token}` })).status).toBe(200);
    const again = await traceOf(gateway, receiver, 200);
    const cached = again.one('quotagate.authenticate');
    expect(cached.attributes['quotagate.auth.cached']).toBe(true);
    expect(again.childrenOf(cached)).toEqual([]);

    // Another token of the key now known: verified, no fetch.
    const other = await tokenOf(rotated, 'user-2');
    expect((await get(gateway, { authorization: `Bearer ${other}` })).status).toBe(200);
    const known = await traceOf(gateway, receiver, 200);
    const verified = known.one('quotagate.authenticate');
    expect(verified.attributes['quotagate.auth.cached']).toBe(false);
    expect(known.childrenOf(verified)).toEqual([]);
    expect(jwks.fetches).toBe(fetchesBefore + 1);
  });

  it('refuses a forged token with its cause and a request without one with no_credentials', async () => {
    const forger = await rsaKey('key-1');
    const forged = await tokenOf(forger, 'mallory');
    expect((await get(gateway, { authorization: `Bearer ${forged}` })).status).toBe(401);
    const trace = await traceOf(gateway, receiver, 401);
    expect(trace.one('quotagate.authenticate').attributes).toMatchObject({
      'quotagate.auth.outcome': 'refused',
      'quotagate.auth.refusal': 'bad_signature',
    });
    expect((await get(gateway)).status).toBe(401);
    const bare = await traceOf(gateway, receiver, 401);
    expect(bare.one('quotagate.authenticate').attributes['quotagate.auth.refusal']).toBe('no_credentials');
  });
});

describe('the authentication span of the key schemes', () => {
  it('admits a basic key in a span of its own with no child, and refuses an unknown one with its cause', async () => {
    const gateway = await tracedGateway({});
    expect((await get(gateway, { authorization: basicAuth(devKey) })).status).toBe(200);
    const trace = await traceOf(gateway, receiver, 200);
    const authenticate = trace.one('quotagate.authenticate');
    expect(authenticate).toMatchObject({
      parentSpanId: trace.server.spanId,
      status: { code: 0 },
      attributes: { 'quotagate.auth.scheme': 'basic', 'quotagate.auth.outcome': 'admitted' },
    });
    expect(trace.childrenOf(authenticate)).toEqual([]);
    // The server span, authenticate, and the upstream's client span (`GET`): no other.
    expect(trace.spans.map((span) => span.name).sort()).toEqual([
      'GET',
      'GET /pets/{petId}',
      'quotagate.authenticate',
    ]);

    const unknown = 'not-a-key-of-anyone-0123456789';
    secrets.push(unknown, basicAuth(unknown).slice('Basic '.length));
    expect((await get(gateway, { authorization: basicAuth(unknown) })).status).toBe(401);
    const refused = await traceOf(gateway, receiver, 401);
    expect(refused.one('quotagate.authenticate').attributes).toMatchObject({
      'quotagate.auth.outcome': 'refused',
      'quotagate.auth.refusal': 'unknown_key',
    });
  });

  it('admits an apikey over HTTPS with no child span, and refuses one over plain HTTP with https_required', async () => {
    const certificate = await createTestCertificate();
    const gateway = await tracedGateway({
      APIKeyAuthType: 'apikey',
      tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
    });
    const overTls = await httpsGet(gateway.running.ports.https, '/pets/1', {
      ca: certificate.cert,
      headers: { apikey: devKey },
    });
    expect(overTls.status).toBe(200);
    const admitted = await traceOf(gateway, receiver, 200);
    const authenticate = admitted.one('quotagate.authenticate');
    expect(authenticate.attributes).toMatchObject({
      'quotagate.auth.scheme': 'apikey',
      'quotagate.auth.outcome': 'admitted',
    });
    expect(admitted.childrenOf(authenticate)).toEqual([]);

    expect((await get(gateway, { apikey: devKey })).status).toBe(401);
    const refused = await traceOf(gateway, receiver, 401);
    expect(refused.one('quotagate.authenticate').attributes).toMatchObject({
      'quotagate.auth.outcome': 'refused',
      'quotagate.auth.refusal': 'https_required',
    });
  });

  it('puts no key, token, signature or hash of a token in any span', () => {
    expect(receiver.spans.length).toBeGreaterThan(0);
    expect(secrets.length).toBeGreaterThan(10);
    for (const text of spanTexts(receiver.spans))
      for (const secret of secrets) expect(text).not.toContain(secret);
  });
});
