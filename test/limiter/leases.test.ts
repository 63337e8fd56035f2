import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { bucketMsOf, type CounterSpec } from '../../src/limiter/counter-store.js';
import type { CounterTrips } from '../../src/limiter/counter-trips.js';
import { IpcCounterTrips, serveCounterTrips } from '../../src/workers/ipc-counter-trips.js';
import { MemoryCounterStore } from '../../src/limiter/memory-counter-store.js';
import { MemoryCounterTrips } from '../../src/limiter/memory-counter-trips.js';
import { RedisCounterTrips } from '../../src/stores/redis-counter-trips.js';
import { SharedCounterStore } from '../../src/limiter/shared-counter-store.js';
import { IpcPeer } from '../../src/workers/ipc-peer.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { suiteRedis } from '../helpers/redis-clients.js';
import { ipcPair } from '../helpers/ipc-pair.js';

/**
 * Leases on each store of shared counters, on one fake clock for the gateways and the store: the tests
 * move time instead of waiting for sub-buckets to end. The same tests hold for the Redis script and for
 * the memory counters a primary of `workers: N` holds (directly, and over the IPC its workers use).
 */
const connect = suiteRedis();

interface Gateway {
  store: SharedCounterStore;
  trips: () => number;
}

/** Shared counters on the test's clock: one gateway's way to them, and a counter's stored total. */
interface SharedCounters {
  tripsOfGateway(): CounterTrips;
  counted(key: string, windowMs: number): Promise<number>;
}

const onRedis = (clock: FakeClock): SharedCounters => {
  const redis = connect();
  const prefix = `test:${randomUUID()}:`;
  return {
    tripsOfGateway: () => new RedisCounterTrips(redis, prefix, clock.now),
    counted: async (key) => Number((await redis.hget(`${prefix}${key}`, 't')) ?? 0),
  };
};

const inMemory = (clock: FakeClock): SharedCounters => {
  const counters = new MemoryCounterStore({ now: clock.now });
  return {
    tripsOfGateway: () => new MemoryCounterTrips(counters),
    counted: (key, windowMs) => usedOf(counters, key, windowMs),
  };
};

const inMemoryOverIpc = (clock: FakeClock): SharedCounters => {
  const counters = new MemoryCounterStore({ now: clock.now });
  const trips = new MemoryCounterTrips(counters);
  let workers = 0;
  return {
    tripsOfGateway: () => {
      const channel = ipcPair();
      workers += 1;
      serveCounterTrips(new IpcPeer(channel.primary), trips, `worker ${workers}`);
      return new IpcCounterTrips(new IpcPeer(channel.worker));
    },
    counted: (key, windowMs) => usedOf(counters, key, windowMs),
  };
};

async function usedOf(counters: MemoryCounterStore, key: string, windowMs: number): Promise<number> {
  return (await counters.usage(key, windowMs)).find((entry) => entry.key === key)?.used ?? 0;
}

/** `size` gateways' stores on one set of shared counters and one clock. */
function fleetOn(open: (clock: FakeClock) => SharedCounters, size: number, clock: FakeClock) {
  const counters = open(clock);
  const gateways: Gateway[] = Array.from({ length: size }, () => {
    let trips = 0;
    const store = new SharedCounterStore({
      trips: counters.tripsOfGateway(),
      clock,
      live: () => size,
      onTrip: () => (trips += 1),
    });
    return { store, trips: () => trips };
  });
  const counted = (key: string, windowMs = minute) => counters.counted(key, windowMs);
  return { gateways, counted };
}

const throttle = (limit: number, windowMs: number, key = 'k'): CounterSpec => ({
  key,
  limit,
  windowMs,
  cost: 1,
  need: 1,
});

const minute = 60_000;

/** The most admissions in any interval of `windowMs` (admission times sorted). */
function mostInAnyWindow(times: number[], windowMs: number): number {
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i += 1) {
    while (times[i]! - times[j]! >= windowMs) j += 1;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe.each([
  ['Redis', onRedis],
  ['the memory counters of a primary (workers: N)', inMemory],
  ['the memory counters of a primary, over IPC', inMemoryOverIpc],
])('leases on %s', (_name, open) => {
  const fleet = (size: number, clock: FakeClock) => fleetOn(open, size, clock);

  it('decide a busy counter with far fewer than one trip per request, and stay exact', async () => {
    const clock = new FakeClock();
    const { gateways, counted } = fleet(1, clock);
    const [gateway] = gateways;
    const spec = throttle(1_000_000, minute);
    let admitted = 0;
    // 5,000 requests a second for 4 s: 20 per 4 ms step.
    for (let step = 0; step < 1_000; step += 1) {
      for (let i = 0; i < 20; i += 1) if ((await gateway!.store.consume([spec])).allowed) admitted += 1;
      await clock.advance(4);
    }
    expect(admitted).toBe(20_000);
    expect(gateway!.trips() / admitted).toBeLessThanOrEqual(0.1);
    // Every admitted unit is charged in Redis; what is charged beyond it is the lease still held.
    const charged = await counted(spec.key);
    expect(charged).toBeGreaterThanOrEqual(admitted);
    await gateway!.store.close();
    expect(await counted(spec.key)).toBe(admitted);
  });

  it('never outlive the sub-bucket they were charged to, and give back what was not spent', async () => {
    const clock = new FakeClock();
    const { gateways, counted } = fleet(1, clock);
    const { store } = gateways[0]!;
    const spec = throttle(1_000_000, minute);
    const bucketMs = bucketMsOf(minute);
    clock.time = Math.ceil(clock.time / bucketMs) * bucketMs;
    // Build a rate, so that the next trip asks for a lease.
    for (let i = 0; i < 50; i += 1) {
      await store.consume([spec]);
      await clock.advance(2);
    }
    const tripsBefore = gateways[0]!.trips();
    await store.consume([spec]);
    const leaseHeld = (await counted(spec.key)) - 51;
    expect(leaseHeld).toBeGreaterThan(0);
    expect(gateways[0]!.trips()).toBe(tripsBefore);
    // The sub-bucket ends: the next check (before the give-back timer) makes a trip, carrying them back.
    clock.time = Math.ceil(clock.time / bucketMs) * bucketMs + 5;
    await store.consume([spec]);
    expect(gateways[0]!.trips()).toBe(tripsBefore + 1);
    const newLease = (await counted(spec.key)) - 52;
    expect(newLease).toBeGreaterThanOrEqual(0);
    await store.close();
    expect(await counted(spec.key)).toBe(52);
  });

  it('give the leftovers of an expired lease back on their own when no trip comes', async () => {
    const clock = new FakeClock();
    const { gateways, counted } = fleet(1, clock);
    const { store } = gateways[0]!;
    const spec = throttle(1_000_000, minute);
    for (let i = 0; i < 50; i += 1) {
      await store.consume([spec]);
      await clock.advance(2);
    }
    expect(await counted(spec.key)).toBeGreaterThan(50);
    await clock.advance(bucketMsOf(minute) + 100);
    await expect.poll(() => counted(spec.key)).toBe(50);
  });

  it('spend a lease that fills the counter to its last unit: the whole limit, and not one more', async () => {
    const clock = new FakeClock();
    const { gateways, counted } = fleet(1, clock);
    const { store } = gateways[0]!;
    const spec = throttle(200, 60 * minute);
    const refused: number[] = [];
    // A check every 4 ms: fast enough to lease, and the last lease fills the counter.
    for (let check = 0; check < 210; check += 1) {
      if (!(await store.consume([spec])).allowed) refused.push(check);
      await clock.advance(4);
    }
    expect(refused).toEqual(Array.from({ length: 10 }, (_, i) => 200 + i));
    await store.close();
    expect(await counted(spec.key, 60 * minute)).toBe(200);
  });

  it('keep a small limit at one trip per admitted request and none per refused one', async () => {
    const clock = new FakeClock();
    const { gateways, counted } = fleet(1, clock);
    const [gateway] = gateways;
    const spec = throttle(20, minute);
    const verdicts: boolean[] = [];
    for (let i = 0; i < 100; i += 1) {
      verdicts.push((await gateway!.store.consume([spec])).allowed);
      await clock.advance(100);
    }
    expect(verdicts.filter(Boolean)).toHaveLength(20);
    expect(gateway!.trips()).toBe(20);
    expect(await counted(spec.key)).toBe(20);
  });

  it('refuse a counter known full locally until its Retry-After, then ask again', async () => {
    const clock = new FakeClock();
    const { gateways } = fleet(1, clock);
    const [gateway] = gateways;
    const spec = throttle(2, minute);
    await gateway!.store.consume([spec]);
    await clock.advance(1_000);
    await gateway!.store.consume([spec]);
    expect(gateway!.trips()).toBe(2);
    // The second check filled the counter: the third is refused here, with no promise and no trip.
    const refused = gateway!.store.consume([spec]);
    expect(refused).toMatchObject({ allowed: false });
    const { retryAfterMs } = refused as { retryAfterMs: number };
    expect(retryAfterMs).toBeGreaterThan(minute - 1_000);
    expect(retryAfterMs).toBeLessThanOrEqual(minute + bucketMsOf(minute) - 1_000);
    expect(gateway!.trips()).toBe(2);
    await clock.advance(retryAfterMs);
    expect((await gateway!.store.consume([spec])).allowed).toBe(true);
    expect(gateway!.trips()).toBe(3);
  });

  it('put back what a refused check took from a lease, all or nothing', async () => {
    const clock = new FakeClock();
    const { gateways, counted } = fleet(2, clock);
    const [first, second] = gateways;
    const roomy = throttle(1_000_000, minute, 'roomy');
    const tight = throttle(1, minute, 'tight');
    for (let i = 0; i < 50; i += 1) {
      await first!.store.consume([roomy]);
      await clock.advance(2);
    }
    expect(await counted('roomy')).toBeGreaterThan(50);
    // The other gateway fills the tight counter: the first does not know it is full.
    expect((await second!.store.consume([tight])).allowed).toBe(true);
    const trips = first!.trips();
    const refused = await first!.store.consume([roomy, tight]);
    expect(refused.allowed).toBe(false);
    expect(first!.trips()).toBe(trips + 1);
    // The lease still holds the unit the refused check took from it: spent now, it counts once.
    expect((await first!.store.consume([roomy])).allowed).toBe(true);
    await first!.store.close();
    expect(await counted('roomy')).toBe(51);
  });

  it('forget that a counter is full when its limit changes', async () => {
    const clock = new FakeClock();
    const { gateways } = fleet(1, clock);
    const { store } = gateways[0]!;
    await store.consume([throttle(1, minute)]);
    expect((await store.consume([throttle(1, minute)])).allowed).toBe(false);
    expect((await store.consume([throttle(5, minute)])).allowed).toBe(true);
  });

  it('keep a fleet of 3 within the limit in every window, each gateway getting its part', async () => {
    const clock = new FakeClock();
    const { gateways } = fleet(3, clock);
    const limit = 3_000;
    const windowMs = 10_000;
    const spec = throttle(limit, windowMs);
    const admittedAt: number[] = [];
    const perGateway = [0, 0, 0];
    // 60 s of three greedy gateways, each 10 requests every 5 ms: 2,000 a second each, 2 × the limit.
    for (let t = 0; t < 60_000; t += 5) {
      for (let g = 0; g < 3; g += 1) {
        for (let i = 0; i < 10; i += 1) {
          if ((await gateways[g]!.store.consume([spec])).allowed) {
            admittedAt.push(clock.time);
            perGateway[g]! += 1;
          }
        }
      }
      await clock.advance(5);
    }
    expect(mostInAnyWindow(admittedAt, windowMs)).toBeLessThanOrEqual(limit);
    // Leases must not starve anyone: each gateway gets a fair part of the 6 windows' worth.
    for (const admitted of perGateway) expect(admitted).toBeGreaterThan(limit);
    // Refused checks mostly cost no trip: a counter known full is refused locally until it has room.
    const trips = gateways.reduce((sum, gateway) => sum + gateway.trips(), 0);
    expect(trips).toBeLessThanOrEqual(admittedAt.length);
  });

  it('spend measured bytes from a byte lease, and send what it cannot cover at once', async () => {
    const clock = new FakeClock();
    const { gateways, counted } = fleet(1, clock);
    const { store } = gateways[0]!;
    const windowMs = 10 * minute;
    const bytes: CounterSpec = { key: 'b', limit: 1_000_000_000, windowMs, cost: 0, need: 1 };
    for (let i = 0; i < 40; i += 1) {
      await store.consume([bytes]);
      await store.add([{ key: 'b', windowMs, amount: 1_000 }]);
      await clock.advance(5);
    }
    const charged = await counted('b', windowMs);
    expect(charged).toBeGreaterThan(40_000);
    const trips = gateways[0]!.trips();
    await store.add([{ key: 'b', windowMs, amount: 1_000 }]);
    expect(gateways[0]!.trips()).toBe(trips);
    expect(await counted('b', windowMs)).toBe(charged);
    await store.add([{ key: 'b', windowMs, amount: 500_000_000 }]);
    expect(gateways[0]!.trips()).toBe(trips + 1);
    await store.close();
    expect(await counted('b', windowMs)).toBe(41_000 + 500_000_000);
  });
});
