import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { bucketsPerWindow } from '../../src/limiter/counter-store.js';
import { counterReservation, MemoryCounterStore } from '../../src/limiter/memory-counter-store.js';
import { MemoryCounterTrips } from '../../src/limiter/memory-counter-trips.js';
import { RedisCounterTrips } from '../../src/stores/redis-counter-trips.js';
import { SharedCounterStore } from '../../src/limiter/shared-counter-store.js';
import { suiteRedis } from '../helpers/redis-clients.js';
import { describeCounterStoreContract } from '../helpers/counter-store-contract.js';

const start = 1_800_000_000_000;
const connect = suiteRedis();

describeCounterStoreContract('memory', async () => {
  const clock = { now: start };
  const store = new MemoryCounterStore({ now: () => clock.now });
  return { store, clock, close: () => store.close() };
});

/** The Redis store as a gateway uses it (leases included), on a clock the test moves. */
function sharedStore(redis: Redis, prefix: string, clock?: { now: number }, live = 1, onTrip?: () => void) {
  return new SharedCounterStore({
    trips: new RedisCounterTrips(redis, prefix, clock ? () => clock.now : undefined),
    clock: {
      now: () => clock?.now ?? Date.now(),
      monotonic: () => clock?.now ?? performance.now(),
      // Leases here expire when the clock passes them; the give-back timer is the lease tests' business.
      setTimeout: () => null,
      clearTimeout: () => undefined,
    },
    live: () => live,
    ...(onTrip ? { onTrip } : {}),
  });
}

describeCounterStoreContract('memory, through the lease protocol (workers: N)', async () => {
  const clock = { now: start };
  const counters = new MemoryCounterStore({ now: () => clock.now });
  const store = new SharedCounterStore({
    trips: new MemoryCounterTrips(counters),
    clock: {
      now: () => clock.now,
      monotonic: () => clock.now,
      setTimeout: () => null,
      clearTimeout: () => undefined,
    },
    live: () => 1,
  });
  return { store, clock, close: () => store.close() };
});

describeCounterStoreContract('redis', async () => {
  const clock = { now: start };
  const store = sharedStore(connect(), `test:${randomUUID()}:`, clock);
  return { store, clock, close: () => store.close() };
});

describe('a calendar window on a fleet of 2 gateways on one Redis', () => {
  it('admits exactly the limit in the window, leases included, and the whole limit again from its start', async () => {
    const redis = connect();
    const prefix = `test:${randomUUID()}:`;
    const clock = { now: Date.parse('2026-11-30T22:00:00Z') };
    let trips = 0;
    const onTrip = () => (trips += 1);
    const fleet = [
      sharedStore(redis, prefix, clock, 2, onTrip),
      sharedStore(connect(), prefix, clock, 2, onTrip),
    ];
    const spec = {
      key: 'monthly',
      limit: 1000,
      windowMs: 0,
      calendar: { period: 'month' as const, timeZone: 'Europe/Berlin', startDay: 1 },
      cost: 1,
      need: 1,
    };
    // Berlin's December starts at 23:00 UTC: both gateways ask at a steady rate, leasing as they go.
    const admittedBy = async (until: number): Promise<number> => {
      let admitted = 0;
      for (; clock.now < until; clock.now += 250) {
        for (const gateway of fleet) {
          for (let i = 0; i < 3; i += 1) if ((await gateway.consume([spec])).allowed) admitted += 1;
        }
      }
      return admitted;
    };
    expect(await admittedBy(Date.parse('2026-11-30T23:00:00Z'))).toBe(1000);
    expect(clock.now).toBe(Date.parse('2026-11-30T23:00:00Z'));
    const tripsInNovember = trips;
    expect(await admittedBy(Date.parse('2026-11-30T23:10:00Z'))).toBe(1000);
    // Leases decide most of the admitted requests with no trip (the refused ones are known full).
    expect(tripsInNovember).toBeLessThan(1000 / 4);
    await Promise.all(fleet.map((gateway) => gateway.close()));
    // Each window's counter is its own key, which expires after it.
    const keys = await redis.keys(`${prefix}monthly@*`);
    expect(keys.sort()).toEqual([
      `${prefix}monthly@${Date.parse('2026-10-31T23:00:00Z')}`,
      `${prefix}monthly@${Date.parse('2026-11-30T23:00:00Z')}`,
    ]);
  });
});

describe('the Redis counters', () => {
  it('keep memory per counter bounded, whatever the limit, and let idle counters expire', async () => {
    const redis = connect();
    const prefix = `test:${randomUUID()}:`;
    const clock = { now: start };
    const store = sharedStore(redis, prefix, clock);
    const spec = { key: 'busy', limit: 1e12, windowMs: 7 * 24 * 3600 * 1000, cost: 1, need: 1 };
    for (let i = 0; i < 1000; i += 1) {
      clock.now += 3_600_000;
      await store.consume([spec]);
    }
    const key = `${prefix}busy`;
    expect(await redis.hlen(key)).toBeLessThanOrEqual(bucketsPerWindow + 3);
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(7 * 24 * 3600 * 1000 * 1.01 + 1);
  });

  it("use the Redis server's clock when no test clock is given", async () => {
    const store = sharedStore(connect(), `test:${randomUUID()}:`);
    const spec = { key: 'k', limit: 1, windowMs: 60_000, cost: 1, need: 1 };
    expect((await store.consume([spec])).allowed).toBe(true);
    const rejected = await store.consume([spec]);
    expect(rejected.allowed).toBe(false);
    expect(rejected.retryAfterMs).toBeGreaterThan(59_000);
    expect(rejected.retryAfterMs).toBeLessThanOrEqual(60_600);
  });

  it('decide a request with several counters in one script call, and send measured bytes at once', async () => {
    const redis = connect();
    const prefix = `test:${randomUUID()}:`;
    const store = sharedStore(redis, prefix);
    const specs = ['a', 'b', 'c'].map((key) => ({ key, limit: 60, windowMs: 60_000, cost: 1, need: 1 }));
    await store.consume(specs);
    // MONITOR sees every command with the address of the client that sent it: count only ours.
    const monitor = await connect().monitor();
    const ours = `127.0.0.1:${redis.stream.localPort}`;
    const commands: string[] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source === ours) commands.push(args[0]!.toLowerCase());
    });
    await store.consume(specs);
    // Bytes measured after an exchange reach Redis before the promise resolves, not with a later check.
    await store.add([{ key: 'a', windowMs: 60_000, amount: 500 }]);
    const another = sharedStore(connect(), prefix);
    expect((await another.usage('a', 60_000))[0]?.used).toBe(2 + 500);
    await expect.poll(() => commands.length).toBe(2);
    expect(commands).toEqual(['evalsha', 'evalsha']);
    monitor.disconnect();
  });
});

describe('MemoryCounterStore memory bound', () => {
  const spec = (key: string, limit = 3) => ({ key, limit, windowMs: 60_000, cost: 1, need: 1 });
  /** Keys of one length, so that each reserves the same bytes. */
  const keyOf = (i: number) => `caller-${String(i).padStart(4, '0')}`;

  function boundedStore(counters: number) {
    const clock = { now: start };
    let refusals = 0;
    let shadowsDropped = 0;
    const store = new MemoryCounterStore({
      now: () => clock.now,
      maxBytes: counters * counterReservation(keyOf(0)),
      onFull: () => (refusals += 1),
      onShadowDropped: () => (shadowsDropped += 1),
    });
    return { store, clock, refusals: () => refusals, shadowsDropped: () => shadowsDropped };
  }
  const shadowSpec = (key: string, limit = 3) => ({ ...spec(key, limit), shadow: true as const });

  it('refuses a request that needs a new counter past the bound, without charging it', () => {
    const { store, refusals } = boundedStore(10);
    for (let i = 0; i < 10; i += 1) expect(store.consume([spec(keyOf(i))]).allowed).toBe(true);
    const refused = store.consume([spec(keyOf(10))]);
    expect(refused).toMatchObject({ allowed: false, outOfRoom: true, retryAfterMs: 60_000 });
    expect(refusals()).toBe(1);
    expect(store.reserved).toBe(10 * counterReservation(keyOf(0)));
    // All or nothing: a request with a known and a new counter charges neither.
    expect(store.consume([spec(keyOf(0)), spec(keyOf(11))]).outOfRoom).toBe(true);
    expect(store.consume([spec(keyOf(0))]).states[0]!.used).toBe(2);
  });

  it('keeps counting the counters it holds at the bound, and never drops one to make room', () => {
    const { store } = boundedStore(2);
    store.consume([spec(keyOf(0))]);
    store.consume([spec(keyOf(1))]);
    for (let i = 0; i < 50; i += 1) store.consume([spec(keyOf(100 + i))]);
    expect(store.consume([spec(keyOf(0))]).states[0]!.used).toBe(2);
    expect(store.consume([spec(keyOf(0))]).states[0]!.used).toBe(3);
    const atLimit = store.consume([spec(keyOf(0))]);
    expect(atLimit).toMatchObject({ allowed: false, states: [{ used: 3 }] });
    expect(atLimit.outOfRoom).toBeUndefined();
  });

  it('drops shadow counts, oldest first, to make room for an enforced check, and never the other way round', () => {
    const { store, refusals, shadowsDropped } = boundedStore(3);
    store.consume([spec(keyOf(0))]);
    store.consume([shadowSpec(keyOf(1))]);
    store.consume([shadowSpec(keyOf(2))]);
    // A shadow check at the bound is out of room without taking anything, and is no refusal to report.
    expect(store.consume([shadowSpec(keyOf(3))]).outOfRoom).toBe(true);
    expect(refusals()).toBe(0);
    expect(store.consume([spec(keyOf(4))]).allowed).toBe(true);
    expect(shadowsDropped()).toBe(1);
    expect(store.consume([shadowSpec(keyOf(1))]).outOfRoom).toBe(true);
    expect(store.consume([shadowSpec(keyOf(2))]).states[0]!.used).toBe(2);
    expect(store.consume([spec(keyOf(5))]).allowed).toBe(true);
    expect(store.consume([spec(keyOf(6))]).outOfRoom).toBe(true);
    expect([refusals(), shadowsDropped()]).toEqual([1, 2]);
  });

  it('keeps a shadow count an enforced check has used: a restriction switched to enforce keeps its counter', () => {
    const { store, shadowsDropped } = boundedStore(2);
    store.consume([shadowSpec(keyOf(0))]);
    store.consume([spec(keyOf(0))]);
    store.consume([shadowSpec(keyOf(1))]);
    expect(store.consume([spec(keyOf(2))]).allowed).toBe(true);
    expect(store.consume([spec(keyOf(3))]).outOfRoom).toBe(true);
    expect(shadowsDropped()).toBe(1);
    expect(store.consume([spec(keyOf(0))]).states[0]!.used).toBe(3);
  });

  it('still adds measured bytes of admitted requests past the bound', async () => {
    const { store } = boundedStore(1);
    store.consume([spec(keyOf(0))]);
    await store.add([{ key: keyOf(1), windowMs: 60_000, amount: 500 }]);
    expect(await store.usage('caller-', 60_000)).toMatchObject([
      { key: keyOf(0), used: 1 },
      { key: keyOf(1), used: 500 },
    ]);
  });

  it('makes room again once idle counters have expired', () => {
    const { store, clock } = boundedStore(3);
    for (let i = 0; i < 3; i += 1) store.consume([spec(keyOf(i))]);
    expect(store.consume([spec(keyOf(3))]).outOfRoom).toBe(true);
    clock.now += 60_000 + 600 + 1;
    expect(store.consume([spec(keyOf(3))]).allowed).toBe(true);
    expect(store.reserved).toBe(counterReservation(keyOf(3)));
  });
});
