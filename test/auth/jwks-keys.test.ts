import { errors, jwtVerify } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { JwksKeys, JwksUnavailable, maxJwksBytes, type JwksKeysOptions } from '../../src/auth/jwks-keys.js';
import { rsaKey, signToken, startJwksServer, type JwksServer } from '../helpers/jwks-server.js';
import { FakeClock } from '../helpers/fake-clock.js';

const servers: JwksServer[] = [];
const stranger = await rsaKey('stranger');
/** A key no JWKS of these tests holds, named `kid` (one RSA key, many names: generating keys is slow). */
const madeUp = (kid: string) => ({ ...stranger, publicJwk: { ...stranger.publicJwk, kid } });
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

/** A set of one key on a real endpoint, its cooldown, age and timeout on a clock the test moves. */
async function setUp(options: Partial<JwksKeysOptions>) {
  const key = await rsaKey('key-1');
  const server = await startJwksServer([key.publicJwk]);
  servers.push(server);
  const failures: Error[] = [];
  const clock = new FakeClock();
  const keys = new JwksKeys(server.url, {
    cooldownMs: 60_000,
    maxAgeMs: 600_000,
    timeoutMs: 2_000,
    clock,
    onFetch: () => undefined,
    onFailure: (error) => failures.push(error),
    ...options,
  });
  const verify = (token: string) => jwtVerify(token, keys.resolve, { algorithms: ['RS256'] });
  return { key, server, keys, failures, verify, clock };
}

describe('the JWKS of the jwt scheme', () => {
  it('fetches the set once at start, and not again for made-up kids within the cooldown', async () => {
    const { key, server, keys, verify } = await setUp({});
    await keys.prefetch();
    await expect(verify(await signToken(key, {}))).resolves.toBeDefined();
    for (let kid = 0; kid < 20; kid += 1) {
      await expect(verify(await signToken(madeUp(`made-up-${kid}`), {}))).rejects.toBeInstanceOf(
        errors.JWKSNoMatchingKey,
      );
    }
    expect(server.fetches).toBe(1);
  });

  it('fetches again for a new kid once the cooldown allows, and verifies with the rotated key', async () => {
    const { server, keys, verify, clock } = await setUp({});
    await keys.prefetch();
    const rotated = await rsaKey('key-2');
    server.keys = [...server.keys, rotated.publicJwk];
    await clock.advance(59_999);
    await expect(verify(await signToken(rotated, {}))).rejects.toBeInstanceOf(errors.JWKSNoMatchingKey);
    await clock.advance(1);
    await expect(verify(await signToken(rotated, {}))).resolves.toBeDefined();
    expect(server.fetches).toBe(2);
  });

  it('keeps verifying with the keys it knows when the endpoint is down at a refetch', async () => {
    const { key, server, keys, failures, verify, clock } = await setUp({});
    await keys.prefetch();
    server.down = true;
    await clock.advance(600_000);
    await expect(verify(await signToken(key, {}))).resolves.toBeDefined();
    await expect(verify(await signToken(madeUp('made-up'), {}))).rejects.toBeInstanceOf(
      errors.JWKSNoMatchingKey,
    );
    expect(server.fetches).toBeGreaterThan(1);
    expect(failures.length).toBeGreaterThan(0);
  });

  it('does not fetch again within the cooldown after a failed fetch, however many made-up kids come', async () => {
    const { key, server, keys, verify, clock } = await setUp({});
    await keys.prefetch();
    server.down = true;
    await clock.advance(60_000);
    for (let kid = 0; kid < 10; kid += 1)
      await expect(verify(await signToken(madeUp(`made-up-${kid}`), {}))).rejects.toThrow();
    await expect(verify(await signToken(key, {}))).resolves.toBeDefined();
    expect(server.fetches).toBe(2);
  });

  it('refuses every token as unavailable when the set was never fetched', async () => {
    const { key, server, keys, verify } = await setUp({});
    server.down = true;
    await keys.prefetch();
    await expect(verify(await signToken(key, {}))).rejects.toBeInstanceOf(JwksUnavailable);
  });

  it.each([
    ['a malformed document', () => '{"keys": [ not json'],
    ['a document over the size limit', () => JSON.stringify({ keys: [], padding: 'x'.repeat(maxJwksBytes) })],
  ])('keeps the keys it knows when the endpoint answers %s', async (_label, body) => {
    const { key, server, keys, failures, verify, clock } = await setUp({});
    await keys.prefetch();
    server.body = body();
    await clock.advance(600_000);
    await expect(verify(await signToken(key, {}))).resolves.toBeDefined();
    await expect.poll(() => failures.length).toBe(1);
    expect(failures).toHaveLength(1);
    expect(server.fetches).toBe(2);
  });

  it('refuses a document over the size limit before any key is known', async () => {
    const { key, server, keys, failures, verify } = await setUp({});
    server.body = JSON.stringify({ keys: [server.keys[0]], padding: 'x'.repeat(maxJwksBytes) });
    await keys.prefetch();
    await expect(verify(await signToken(key, {}))).rejects.toBeInstanceOf(JwksUnavailable);
    expect(failures[0]!.message).toMatch(/over 1048576 bytes/);
  });

  it('gives up on an endpoint that never answers once the timeout has passed, not before', async () => {
    const { key, server, keys, failures, verify, clock } = await setUp({});
    server.hanging = true;
    const fetched = keys.prefetch();
    const token = verify(await signToken(key, {}));
    let settled = false;
    token.catch(() => undefined).finally(() => (settled = true));
    await clock.advance(1_999);
    expect([settled, failures]).toEqual([false, []]);
    await clock.advance(1);
    await fetched;
    await expect(token).rejects.toBeInstanceOf(JwksUnavailable);
    expect(failures[0]).toBeInstanceOf(errors.JWKSTimeout);
    expect(server.fetches).toBe(1);
  });

  it('answers a token with a known kid at once while a refetch for an unknown kid hangs', async () => {
    const { key, server, keys, verify, clock } = await setUp({});
    await keys.prefetch();
    server.hanging = true;
    await clock.advance(60_000);
    const unknown = verify(await signToken(madeUp('made-up'), {})).catch((error: unknown) => error);
    await expect.poll(() => server.fetches).toBe(2);
    await expect(verify(await signToken(key, {}))).resolves.toBeDefined();
    await clock.advance(2_000);
    expect(await unknown).toBeInstanceOf(errors.JWKSNoMatchingKey);
  });

  it('answers a token with a known kid at once when its set is old, and fetches the set again meanwhile', async () => {
    const { key, server, keys, verify, clock } = await setUp({});
    await keys.prefetch();
    server.hanging = true;
    await clock.advance(600_000);
    await expect(verify(await signToken(key, {}))).resolves.toBeDefined();
    await expect(verify(await signToken(key, {}))).resolves.toBeDefined();
    await expect.poll(() => server.fetches).toBe(2);
  });
});
