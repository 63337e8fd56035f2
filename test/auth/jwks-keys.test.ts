import { errors, jwtVerify } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { JwksKeys, JwksUnavailable, maxJwksBytes, type JwksKeysOptions } from '../../src/auth/jwks-keys.js';
import { rsaKey, signToken, startJwksServer, type JwksServer } from '../helpers/jwks-server.js';
import { startSilentServer } from '../helpers/tcp-relay.js';

const servers: JwksServer[] = [];
const stranger = await rsaKey('stranger');
/** A key no JWKS of these tests holds, named `kid` (one RSA key, many names: generating keys is slow). */
const madeUp = (kid: string) => ({ ...stranger, publicJwk: { ...stranger.publicJwk, kid } });
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

async function setUp(options: Partial<JwksKeysOptions>) {
  const key = await rsaKey('key-1');
  const server = await startJwksServer([key.publicJwk]);
  servers.push(server);
  const failures: Error[] = [];
  const keys = new JwksKeys(server.url, {
    cooldownMs: 60_000,
    maxAgeMs: 600_000,
    timeoutMs: 2_000,
    onFetch: () => undefined,
    onFailure: (error) => failures.push(error),
    ...options,
  });
  const verify = (token: string) => jwtVerify(token, keys.resolve, { algorithms: ['RS256'] });
  return { key, server, keys, failures, verify };
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
    const { server, keys, verify } = await setUp({ cooldownMs: 0 });
    await keys.prefetch();
    const rotated = await rsaKey('key-2');
    server.keys = [...server.keys, rotated.publicJwk];
    await expect(verify(await signToken(rotated, {}))).resolves.toBeDefined();
    expect(server.fetches).toBe(2);
  });

  it('keeps verifying with the keys it knows when the endpoint is down at a refetch', async () => {
    const { key, server, keys, failures, verify } = await setUp({ cooldownMs: 0, maxAgeMs: 0 });
    await keys.prefetch();
    server.down = true;
    await expect(verify(await signToken(key, {}))).resolves.toBeDefined();
    await expect(verify(await signToken(madeUp('made-up'), {}))).rejects.toBeInstanceOf(
      errors.JWKSNoMatchingKey,
    );
    expect(server.fetches).toBeGreaterThan(1);
    expect(failures.length).toBeGreaterThan(0);
  });

  it('does not fetch again within the cooldown after a failed fetch, however many made-up kids come', async () => {
    const { key, server, keys, verify } = await setUp({ maxAgeMs: 0 });
    await keys.prefetch();
    server.down = true;
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
    const { key, server, keys, failures, verify } = await setUp({ cooldownMs: 0, maxAgeMs: 0 });
    await keys.prefetch();
    server.body = body();
    await expect(verify(await signToken(key, {}))).resolves.toBeDefined();
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

  it('gives up on an endpoint that never answers within the timeout', async () => {
    const silent = await startSilentServer();
    const failures: Error[] = [];
    const keys = new JwksKeys(`http://127.0.0.1:${silent.port}/certs`, {
      cooldownMs: 60_000,
      maxAgeMs: 600_000,
      timeoutMs: 200,
      onFetch: () => undefined,
      onFailure: (error) => failures.push(error),
    });
    await keys.prefetch();
    await silent.close();
    expect(failures[0]).toMatchObject({ name: 'TimeoutError' });
  });
});
