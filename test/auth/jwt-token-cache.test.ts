import { afterEach, describe, expect, it } from 'vitest';
import type { AuthResult } from '../../src/auth/authenticator.js';
import { createJwtAuthenticator } from '../../src/auth/jwt-authenticator.js';
import { systemClock } from '../../src/kit/clock.js';
import { createLogger } from '../../src/observe/log.js';
import { startAuthProbe } from '../helpers/auth-probe.js';
import { rsaKey, signToken, startJwksServer } from '../helpers/jwks-server.js';
import { request } from '../helpers/raw-http.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

describe('the verified tokens of the jwt scheme', () => {
  it('are remembered until their exp at the latest, never past it', async () => {
    const [first, rotated] = await Promise.all([rsaKey('key-1'), rsaKey('key-2')]);
    const jwks = await startJwksServer([first.publicJwk]);
    stops.push(() => jwks.close());
    const clock = { now: Date.now() };
    const authenticator = createJwtAuthenticator(
      {
        jwksUri: jwks.url,
        issuer: 'idp',
        audience: 'api',
        applicationClaim: 'client_id',
        clockTolerance: 0,
        jwksCooldown: 30_000,
        jwksTimeout: 5_000,
      },
      { logger: createLogger({ level: 'silent' }), clock: { ...systemClock, now: () => clock.now } },
    );
    const probe = await startAuthProbe(authenticator);
    stops.push(() => probe.close());
    const claims = { iss: 'idp', aud: 'api', client_id: 'app-a', exp: Math.floor(clock.now / 1000) + 60 };
    const [token, rotatedToken] = await Promise.all([signToken(first, claims), signToken(rotated, claims)]);
    const authenticate = async (bearer: string) =>
      JSON.parse(
        (await request(probe.url, { path: '/', headers: { authorization: `Bearer ${bearer}` } })).body,
      ) as AuthResult;
    expect(await authenticate(token)).toMatchObject({ ok: true, principal: { application: 'app-a' } });
    expect(jwks.fetches).toBe(1);

    // The provider rotates: key-1 leaves its set, and a token of key-2 has the gateway fetch it. From
    // then on a check of the first token would find no key for it (no fetch before the cooldown).
    jwks.keys = [rotated.publicJwk];
    clock.now += 30_000;
    expect(await authenticate(rotatedToken)).toMatchObject({ ok: true });
    expect(jwks.fetches).toBe(2);
    // Remembered, not checked again: admitted until its exp, with no fetch.
    expect(await authenticate(token)).toMatchObject({ ok: true, principal: { application: 'app-a' } });
    clock.now += 29_000;
    expect(await authenticate(token)).toMatchObject({ ok: true });
    expect(jwks.fetches).toBe(2);

    // Past its exp it is checked again, whatever the keys: with key-1 back in the set (fetched once the
    // cooldown is over), it is refused as expired.
    jwks.keys = [first.publicJwk, rotated.publicJwk];
    clock.now += 2_000;
    expect(await authenticate(token)).toMatchObject({
      ok: false,
      challenge: expect.stringContaining('expired'),
    });
    expect(jwks.fetches).toBe(3);
  });
});
