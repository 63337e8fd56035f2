import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { rsaKey, signToken, startJwksServer, type SigningKey } from '../helpers/jwks-server.js';
import { request } from '../helpers/raw-http.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * A JWKS endpoint that hangs, through a started gateway whose clock (token times, the JWKS cooldown and
 * fetch timeout) the test moves: nothing here waits for real time to pass.
 */
const claims = { iss: 'idp', aud: 'api', client_id: 'app-a' };
const defer = cleanupAfterEach();
let key: SigningKey;
let stranger: SigningKey;
let upstream: TestUpstream;
beforeAll(async () => {
  [key, stranger] = await Promise.all([rsaKey('key-1'), rsaKey('stranger')]);
  upstream = await startUpstream();
});
afterAll(() => upstream.close());

/** A gateway of the jwt scheme over a JWKS endpoint of the test's, on `clock`. */
async function jwtGateway(jwks: { url: string }, clock: FakeClock): Promise<TestGateway> {
  const jwt = { jwksUri: jwks.url, issuer: 'idp', audience: 'api', jwksCooldown: 10_000, jwksTimeout: 2_000 };
  const gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, { APIKeyAuthType: 'jwt', jwt }),
    {},
    { now: clock.now, timers: clock },
  );
  defer(() => gateway.close());
  return gateway;
}

/** A GET of the pets API with `token`, and whether it has been answered yet. */
function send(gateway: TestGateway, token: string) {
  const sent = {
    answered: false,
    response: request(gateway.url, { path: '/pets/1', headers: { authorization: `Bearer ${token}` } }),
  };
  void sent.response.finally(() => (sent.answered = true));
  return sent;
}

/** Lets the gateway's sockets and promises move without moving the clock. */
async function settleIo(): Promise<void> {
  for (let i = 0; i < 10; i += 1) await settle();
}

describe('the jwt scheme when its JWKS endpoint hangs', () => {
  it('answers a token 503 once jwt.jwksTimeout has passed on its clock, when no key was ever fetched', async () => {
    const jwks = await startJwksServer([key.publicJwk]);
    defer(() => jwks.close());
    jwks.hanging = true;
    const clock = new FakeClock(Date.now());
    const gateway = await jwtGateway(jwks, clock);
    const waiting = send(gateway, await signToken(key, claims));
    await expect.poll(() => jwks.fetches).toBe(1);
    await clock.advance(1_999);
    await settleIo();
    expect(waiting.answered).toBe(false);
    await clock.advance(1);
    expect((await waiting.response).status).toBe(503);
    // Within the cooldown a token is answered 503 at once, without another fetch.
    expect((await send(gateway, await signToken(key, claims)).response).status).toBe(503);
    expect(jwks.fetches).toBe(1);
  });

  it('admits tokens with a known kid while a refetch for an unknown kid hangs', async () => {
    const jwks = await startJwksServer([key.publicJwk]);
    defer(() => jwks.close());
    const clock = new FakeClock(Date.now());
    const gateway = await jwtGateway(jwks, clock);
    expect((await send(gateway, await signToken(key, claims)).response).status).toBe(200);
    jwks.hanging = true;
    // jwt.jwksCooldown: a made-up kid fetches the set again once 10 s have passed since the last fetch.
    await clock.advance(10_000);
    const unknown = send(gateway, await signToken(stranger, claims));
    await expect.poll(() => jwks.fetches).toBe(2);
    for (let i = 0; i < 3; i += 1) {
      const known = await signToken(key, { ...claims, sub: `user-${i}` });
      expect((await send(gateway, known).response).status).toBe(200);
    }
    expect(unknown.answered).toBe(false);
    await clock.advance(2_000);
    expect((await unknown.response).status).toBe(401);
    expect(jwks.fetches).toBe(2);
  });
});
