import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisCounterTrips } from '../../src/stores/redis-counter-trips.js';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';

/**
 * What one check costs Redis, counted by Redis itself (INFO commandstats counts the commands a script
 * runs): bounded whatever the idle gap, because expired sub-buckets are found among the fields present.
 * A private redis-server, so that no other test's commands are counted.
 */
const executable = await redisServerPath();
let redis: RedisProcess;
let client: Redis;
beforeAll(async () => {
  if (!executable) return;
  redis = await startRedisProcess(executable);
  client = new Redis(redis.url);
});
afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});

/** Commands Redis ran, scripts' own commands included, apart from the script calls themselves. */
async function commandsRun(): Promise<number> {
  const stats = await client.info('commandstats');
  let calls = 0;
  for (const [, name, count] of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!['evalsha', 'eval', 'info', 'script'].includes(name!)) calls += Number(count);
  }
  return calls;
}

describe.runIf(executable)('the counter script', () => {
  it.each([0, 30_000, 59_000, 600_000])(
    'costs a bounded number of Redis calls after an idle gap of %i ms',
    async (gapMs) => {
      const clock = { now: 1_800_000_000_000 };
      const trips = new RedisCounterTrips(client, `cost:${gapMs}:`, () => clock.now);
      const check = { key: 'k', limit: 1_000_000, windowMs: 60_000, cost: 1, need: 1, wanted: 0 };
      const trip = { checks: [check], additions: [], giveBacks: [], live: 1 };
      // A busy minute: units in every one of the 100 sub-buckets.
      for (let i = 0; i < 100; i += 1) {
        await trips.trip(trip);
        clock.now += 600;
      }
      clock.now += gapMs;
      const before = await commandsRun();
      const reply = await trips.trip(trip);
      const calls = (await commandsRun()) - before - 1;
      expect(reply.allowed).toBe(true);
      // HMGET, then at most HGETALL + HDEL + HSET to drop what left the window, then HINCRBY + HSET + PEXPIRE.
      expect(calls).toBeLessThanOrEqual(7);
      const expected = gapMs >= 60_000 ? 1 : 100 - Math.floor(gapMs / 600) + 1;
      expect(reply.checks[0]!.used).toBeGreaterThanOrEqual(expected - 1);
      expect(reply.checks[0]!.used).toBeLessThanOrEqual(expected);
    },
  );

  it('costs a bounded number of calls to refuse, with its Retry-After read from the fields', async () => {
    const clock = { now: 1_800_000_000_000 };
    const trips = new RedisCounterTrips(client, 'cost:refuse:', () => clock.now);
    const check = { key: 'k', limit: 100, windowMs: 60_000, cost: 1, need: 1, wanted: 0 };
    const trip = { checks: [check], additions: [], giveBacks: [], live: 1 };
    for (let i = 0; i < 100; i += 1) {
      await trips.trip(trip);
      clock.now += 590;
    }
    const before = await commandsRun();
    const refused = await trips.trip(trip);
    const calls = (await commandsRun()) - before - 1;
    expect(refused.allowed).toBe(false);
    expect(calls).toBeLessThanOrEqual(3);
    // The oldest unit came 59,000 ms ago and leaves a window plus at most one sub-bucket after it came.
    expect(refused.retryAfterMs).toBeGreaterThan(60_000 - 59_000);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(60_600 - 59_000);
  });
});
