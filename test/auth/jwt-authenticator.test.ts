import { afterEach, describe, expect, it } from 'vitest';
import type { AuthResult } from '../../src/auth/authenticator.js';
import { createJwtAuthenticator } from '../../src/auth/jwt-authenticator.js';
import { startAuthProbe } from '../helpers/auth-probe.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { rsaKey, signToken, startJwksServer, type SigningKey } from '../helpers/jwks-server.js';
import { capturingLogger } from '../helpers/log-capture.js';
import { request } from '../helpers/raw-http.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

const cooldown = 30_000;
const stranger = await rsaKey('stranger');
/** A key no JWKS of these tests holds, named `kid` (one RSA key, many names: generating keys is slow). */
const madeUp = (kid: string): SigningKey => ({ ...stranger, publicJwk: { ...stranger.publicJwk, kid } });
/** The claims of a real token of the provider: its issuer, the gateway's audience. */
const good = { iss: 'idp', aud: 'api', client_id: 'app-a' };

/**
 * The jwt scheme over a real JWKS endpoint (one key, `key-1`) behind a real HTTP probe, its cooldown on a
 * clock the test moves (from now: the tokens' exp is an hour from the wall clock), its log captured.
 */
async function setUp() {
  const key = await rsaKey('key-1');
  const jwks = await startJwksServer([key.publicJwk]);
  stops.push(() => jwks.close());
  const clock = new FakeClock(Date.now());
  const { lines, logger } = capturingLogger();
  const authenticator = createJwtAuthenticator(
    {
      jwksUri: jwks.url,
      issuer: 'idp',
      audience: 'api',
      applicationClaim: 'client_id',
      clockTolerance: 0,
      jwksCooldown: cooldown,
      jwksTimeout: 5_000,
    },
    { logger, clock },
  );
  const probe = await startAuthProbe(authenticator);
  stops.push(() => probe.close());
  await expect.poll(() => jwks.fetches).toBe(1);
  const authenticate = async (token: string) =>
    JSON.parse(
      (await request(probe.url, { path: '/', headers: { authorization: `Bearer ${token}` } })).body,
    ) as AuthResult;
  return { key, jwks, clock, lines, authenticate };
}

const refusedForKey = {
  ok: false,
  challenge: expect.stringContaining('no key of the identity provider matches the token'),
};

describe('a key rotation of the identity provider under made-up kids', () => {
  it('is accepted at once, although a made-up kid fetched the set in every cooldown before it', async () => {
    const { jwks, clock, authenticate } = await setUp();
    // The attacker's junk: a made-up kid at the start of every cooldown, which fetches the set each time.
    for (let round = 1; round <= 3; round += 1) {
      await clock.advance(cooldown);
      expect(await authenticate(await signToken(madeUp(`junk-${round}`), { iss: 'x' }))).toMatchObject(
        refusedForKey,
      );
      expect(jwks.fetches).toBe(1 + round);
    }
    // A second later the provider rotates, and its first token with the new key comes.
    await clock.advance(1_000);
    const rotated = await rsaKey('key-2');
    jwks.keys = [...jwks.keys, rotated.publicJwk];
    expect(await authenticate(await signToken(rotated, good))).toMatchObject({
      ok: true,
      principal: { application: 'app-a' },
    });
    expect(jwks.fetches).toBe(5);
    // Junk within the cooldown still fetches nothing.
    expect(await authenticate(await signToken(madeUp('junk-4'), { iss: 'x' }))).toMatchObject(refusedForKey);
    expect(jwks.fetches).toBe(5);
  });

  it('fetches the set for at most three made-up kids per cooldown, however well their claims are made up', async () => {
    const { jwks, clock, authenticate } = await setUp();
    const flood = async (from: number) => {
      for (let kid = from; kid < from + 20; kid += 1)
        expect(await authenticate(await signToken(madeUp(`forged-${kid}`), good))).toMatchObject(
          refusedForKey,
        );
    };
    await flood(0);
    expect(jwks.fetches).toBe(1 + 3);
    // One kid fetches once: sent again within the cooldown, it fetches nothing more.
    await clock.advance(cooldown - 1);
    expect(await authenticate(await signToken(madeUp('forged-0'), good))).toMatchObject(refusedForKey);
    expect(jwks.fetches).toBe(4);
    // The next cooldown: one fetch as for any unknown kid, and three more for kids whose claims check out.
    await clock.advance(1);
    await flood(100);
    expect(jwks.fetches).toBe(4 + 1 + 3);
  });
});

describe('the log of the jwt scheme', () => {
  it('says why a JWKS fetch failed in words, as a string, once per cooldown of the failed endpoint', async () => {
    const { jwks, clock, lines, authenticate } = await setUp();
    jwks.down = true;
    await clock.advance(cooldown);
    expect(await authenticate(await signToken(madeUp('unknown'), good))).toMatchObject(refusedForKey);
    // An endpoint that failed is given its cooldown, whatever claims the next made-up kids carry.
    for (let kid = 0; kid < 5; kid += 1)
      expect(await authenticate(await signToken(madeUp(`forged-${kid}`), good))).toMatchObject(refusedForKey);
    expect(jwks.fetches).toBe(2);
    const failed = lines.filter((line) => line.msg === 'jwks fetch failed');
    expect(failed).toEqual([
      expect.objectContaining({
        level: 40,
        jwksUri: jwks.url,
        err: expect.objectContaining({ name: 'JOSEError', message: 'the JWKS endpoint answered 500' }),
      }),
    ]);
  });
});
