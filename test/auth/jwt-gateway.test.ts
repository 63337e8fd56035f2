import { createHmac } from 'node:crypto';
import { exportSPKI, importJWK, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eachStore, useEnforcementGateways } from '../helpers/enforcement-gateways.js';
import {
  rsaKey,
  signToken,
  startJwksServer,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwks-server.js';
import { request } from '../helpers/raw-http.js';
import { adminUser, throttle, userAuth, type TestGateway } from '../helpers/test-gateway.js';

const issuer = 'https://idp.example/realms/test';
const audience = 'pets-api';
const claims = (overrides: Record<string, unknown> = {}) => ({
  iss: issuer,
  aud: audience,
  sub: 'user-1',
  client_id: 'app-a',
  ...overrides,
});
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const bare = 'Bearer realm="quotagate"';
const invalid = (description: string) =>
  `Bearer realm="quotagate", error="invalid_token", error_description="${description}"`;

let key: SigningKey;
let otherKey: SigningKey;
let jwks: JwksServer;
beforeAll(async () => {
  key = await rsaKey('key-1');
  otherKey = await rsaKey('key-of-another-idp');
  jwks = await startJwksServer([key.publicJwk]);
});
afterAll(() => jwks.close());

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const get = (gateway: TestGateway, token?: string) =>
  request(gateway.url, { path: '/pets/1', headers: token === undefined ? {} : bearer(token) });

describe.each(eachStore)('the jwt scheme through a started gateway on %s', (_store, storeOverrides) => {
  const { gatewayWith, upstream } = useEnforcementGateways();
  const jwtGateway = () =>
    gatewayWith({
      ...storeOverrides(),
      APIKeyAuthType: 'jwt',
      jwt: { jwksUri: jwks.url, issuer, audience },
    });

  it('admits a good token and counts it against the quota of its client_id application', async () => {
    const gateway = await jwtGateway();
    const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/applications/app-a/quota`, {
      method: 'POST',
      headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'APPLICATION', name: 'A', restrictions: [throttle(1, 1, 'minute')] }),
    });
    expect(res.status).toBe(201);
    const a = await signToken(key, claims());
    const b = await signToken(key, claims({ client_id: 'app-b' }));
    const before = upstream().requests.length;
    expect([(await get(gateway, a)).status, (await get(gateway, a)).status]).toEqual([200, 429]);
    expect((await get(gateway, b)).status).toBe(200);
    const seen = upstream().requests.slice(before);
    expect(seen).toHaveLength(2);
    expect(seen.every((sent) => sent.headers.authorization === undefined)).toBe(true);
  });

  it('answers a request without a token 401 with a bare Bearer challenge (RFC 6750 section 3)', async () => {
    const gateway = await jwtGateway();
    const res = await get(gateway);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe(bare);
  });

  it('refuses every forged or unfit token with invalid_token, and none reaches the upstream', async () => {
    const gateway = await jwtGateway();
    const good = await signToken(key, claims());
    const [header, , signature] = good.split('.');
    const publicPem = await exportSPKI(
      (await importJWK(key.publicJwk, 'RS256', { extractable: true })) as CryptoKey,
    );
    const hs256Header = b64url({ alg: 'HS256', kid: 'key-1', typ: 'JWT' });
    const hs256Body = b64url({ ...claims(), exp: Math.floor(Date.now() / 1000) + 3600 });
    const hs256Signature = createHmac('sha256', publicPem)
      .update(`${hs256Header}.${hs256Body}`)
      .digest('base64url');
    const attacks: Array<[string, string, string]> = [
      [
        'alg none',
        `${b64url({ alg: 'none' })}.${b64url(claims({ exp: 2e9 }))}.`,
        'the token is signed with an algorithm the gateway does not accept',
      ],
      [
        'HS256 keyed with the RSA public key',
        `${hs256Header}.${hs256Body}.${hs256Signature}`,
        'the token is signed with an algorithm the gateway does not accept',
      ],
      [
        'a tampered payload',
        `${header}.${b64url({ ...claims({ client_id: 'app-b' }), exp: 2e9 })}.${signature}`,
        'the signature is not valid',
      ],
      [
        'another audience',
        await signToken(key, claims({ aud: 'other-api' })),
        'the aud claim is not accepted: check_failed',
      ],
      [
        'another issuer',
        await signToken(key, claims({ iss: 'https://evil.example' })),
        'the iss claim is not accepted: check_failed',
      ],
      [
        'an expired token',
        await signToken(key, claims({ exp: Math.floor(Date.now() / 1000) - 3600 })),
        'the token has expired',
      ],
      [
        "a kid of another identity provider's JWKS",
        await signToken(otherKey, claims()),
        'no key of the identity provider matches the token',
      ],
      [
        "another identity provider's key posing under the kid of this one's",
        await signToken({ ...otherKey, publicJwk: { ...otherKey.publicJwk, kid: 'key-1' } }, claims()),
        'the signature is not valid',
      ],
    ];
    const before = upstream().requests.length;
    for (const [name, token, description] of attacks) {
      const res = await get(gateway, token);
      expect({ name, status: res.status, challenge: res.headers['www-authenticate'] }).toEqual({
        name,
        status: 401,
        challenge: invalid(description),
      });
    }
    expect(upstream().requests.length).toBe(before);
  });
});

describe('the jwt scheme with a shared secret beside the JWKS', () => {
  const { gatewayWith } = useEnforcementGateways();
  const secret = 'a-shared-secret-of-at-least-32-bytes!';

  it('admits an HS256 token signed with jwt.secret, and refuses one keyed with the JWKS public key', async () => {
    const gateway = await gatewayWith({
      APIKeyAuthType: 'jwt',
      jwt: { jwksUri: jwks.url, issuer, audience, secret },
    });
    const hs256 = (key: string | Uint8Array) =>
      new SignJWT(claims({ exp: Math.floor(Date.now() / 1000) + 3600 }))
        .setProtectedHeader({ alg: 'HS256', kid: 'key-1' })
        .sign(typeof key === 'string' ? new TextEncoder().encode(key) : key);
    const publicPem = await exportSPKI(
      (await importJWK(key.publicJwk, 'RS256', { extractable: true })) as CryptoKey,
    );
    expect((await get(gateway, await hs256(secret))).status).toBe(200);
    const confused = await get(gateway, await hs256(publicPem));
    expect([confused.status, confused.headers['www-authenticate']]).toEqual([
      401,
      invalid('the signature is not valid'),
    ]);
  });

  it('fetches the JWKS again for 3 made-up kids at most within the cooldown, only those whose claims check out', async () => {
    const gateway = await gatewayWith({
      APIKeyAuthType: 'jwt',
      jwt: { jwksUri: jwks.url, issuer, audience },
    });
    expect((await get(gateway, await signToken(key, claims()))).status).toBe(200);
    const before = jwks.fetches;
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/^quotagate_jwks_fetches_total\{result="ok"\} 1$/m);
    const madeUp = (kid: number) => ({
      ...otherKey,
      publicJwk: { ...otherKey.publicJwk, kid: `made-up-${kid}` },
    });
    for (let kid = 0; kid < 10; kid += 1)
      expect((await get(gateway, await signToken(madeUp(kid), claims({ iss: 'another' })))).status).toBe(401);
    expect(jwks.fetches).toBe(before);
    for (let kid = 10; kid < 20; kid += 1)
      expect((await get(gateway, await signToken(madeUp(kid), claims()))).status).toBe(401);
    expect(jwks.fetches).toBe(before + 3);
  });
});

describe('the jwt scheme with forwardClaims', () => {
  const { gatewayWith, upstream } = useEnforcementGateways();

  it('sends the claims upstream as the fields named, and drops a client-sent field of that name', async () => {
    const gateway = await gatewayWith({
      APIKeyAuthType: 'jwt',
      jwt: { jwksUri: jwks.url, issuer, audience, forwardClaims: { sub: 'X-User', roles: 'X-Roles' } },
    });
    const token = await signToken(key, claims({ roles: ['reader', 'writer'] }));
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { ...bearer(token), 'x-user': 'admin', 'x-roles': 'root' },
    });
    expect(res.status).toBe(200);
    const sent = upstream().requests.at(-1)!;
    expect([sent.headers['x-user'], sent.headers['x-roles']]).toEqual(['user-1', '["reader","writer"]']);
    expect(sent.rawHeaders.filter((name) => /^x-(user|roles)$/i.test(name))).toHaveLength(2);
  });
});

describe('the jwt scheme before its JWKS could be fetched', () => {
  const { gatewayWith } = useEnforcementGateways();

  it('answers 503 rather than accept or refuse a token it has no key to check', async () => {
    const down = await startJwksServer([]);
    down.down = true;
    try {
      const gateway = await gatewayWith({
        APIKeyAuthType: 'jwt',
        jwt: { jwksUri: down.url, issuer, audience },
      });
      expect((await get(gateway, await signToken(key, claims()))).status).toBe(503);
      const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
      expect(metrics).toMatch(/^quotagate_jwks_fetches_total\{result="failed"\} [1-9]/m);
    } finally {
      await down.close();
    }
  });
});
