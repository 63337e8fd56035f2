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
    const key = await rsaKey('key-1');
    const jwks = await startJwksServer([key.publicJwk]);
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
    const token = await signToken(key, {
      iss: 'idp',
      aud: 'api',
      client_id: 'app-a',
      exp: Math.floor(clock.now / 1000) + 60,
    });
    const authenticate = async () =>
      JSON.parse(
        (await request(probe.url, { path: '/', headers: { authorization: `Bearer ${token}` } })).body,
      ) as AuthResult;
    expect(await authenticate()).toMatchObject({ ok: true, principal: { application: 'app-a' } });
    clock.now += 30_000;
    expect(await authenticate()).toMatchObject({ ok: true });
    clock.now += 31_000;
    expect(await authenticate()).toMatchObject({ ok: false, challenge: expect.stringContaining('expired') });
  });
});
