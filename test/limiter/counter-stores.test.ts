import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { bucketsPerWindow } from '../../src/limiter/counter-store.js';
import { MemoryCounterStore } from '../../src/limiter/memory-counter-store.js';
import { RedisCounterStore } from '../../src/limiter/redis-counter-store.js';
import { describeCounterStoreContract } from './counter-store-contract.js';

const start = 1_800_000_000_000;
const connections: Redis[] = [];
const connect = () => {
  const connection = new Redis(inject('redisUrl'));
  connections.push(connection);
  return connection;
};
afterAll(async () => {
  await Promise.all(connections.map((connection) => connection.quit()));
});

describeCounterStoreContract('memory', async () => {
  const clock = { now: start };
  const store = new MemoryCounterStore(() => clock.now);
  return { store, clock, close: () => store.close() };
});

describeCounterStoreContract('redis', async () => {
  const clock = { now: start };
  const store = new RedisCounterStore(connect(), `test:${randomUUID()}:`, () => clock.now);
  return { store, clock, close: () => store.close() };
});

describe('RedisCounterStore', () => {
  it('keeps memory per counter bounded, whatever the limit, and lets idle counters expire', async () => {
    const redis = connect();
    const prefix = `test:${randomUUID()}:`;
    const clock = { now: start };
    const store = new RedisCounterStore(redis, prefix, () => clock.now);
    const spec = { key: 'busy', limit: 1e12, windowMs: 7 * 24 * 3600 * 1000, cost: 1, need: 1 };
    for (let i = 0; i < 1000; i += 1) {
      clock.now += 3_600_000;
      await store.consume([spec]);
    }
    const key = `${prefix}{counters}:busy`;
    expect(await redis.hlen(key)).toBeLessThanOrEqual(bucketsPerWindow + 3);
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(7 * 24 * 3600 * 1000 * 1.01 + 1);
  });

  it("uses the Redis server's clock when no test clock is given", async () => {
    const store = new RedisCounterStore(connect(), `test:${randomUUID()}:`);
    const spec = { key: 'k', limit: 1, windowMs: 60_000, cost: 1, need: 1 };
    expect((await store.consume([spec])).allowed).toBe(true);
    const rejected = await store.consume([spec]);
    expect(rejected.allowed).toBe(false);
    expect(rejected.retryAfterMs).toBeGreaterThan(59_000);
    expect(rejected.retryAfterMs).toBeLessThanOrEqual(60_600);
  });

  it('decides a request with several counters in one round trip', async () => {
    const redis = connect();
    const store = new RedisCounterStore(redis, `test:${randomUUID()}:`);
    const specs = ['a', 'b', 'c'].map((key) => ({ key, limit: 10_000, windowMs: 60_000, cost: 1, need: 1 }));
    await store.consume(specs);
    // MONITOR sees every command with the address of the client that sent it: count only ours.
    const monitor = await connect().monitor();
    const ours = `127.0.0.1:${redis.stream.localPort}`;
    const commands: string[] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source === ours) commands.push(args[0]!.toLowerCase());
    });
    await store.consume(specs);
    // Bytes measured after an exchange travel with the next check: still one round trip per request.
    await store.add([{ key: 'a', windowMs: 60_000, amount: 500 }]);
    await store.consume(specs);
    await expect.poll(() => commands.length).toBe(2);
    expect(commands).toEqual(['evalsha', 'evalsha']);
    expect((await store.usage('a', 60_000))[0]?.used).toBe(3 + 500);
    monitor.disconnect();
  });
});
