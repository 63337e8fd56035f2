import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slotRetryMs } from '../../src/limiter/counter-store.js';
import type { CounterTrips, TripCheck } from '../../src/limiter/counter-trips.js';
import { MemoryCounterStore } from '../../src/limiter/memory-counter-store.js';
import { MemoryCounterTrips } from '../../src/limiter/memory-counter-trips.js';
import { RedisCounterTrips } from '../../src/stores/redis-counter-trips.js';
import { IpcCounterTrips, serveCounterTrips } from '../../src/workers/ipc-counter-trips.js';
import { IpcPeer } from '../../src/workers/ipc-peer.js';
import { ipcPair } from '../helpers/ipc-pair.js';
import { clusterTools, startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { suiteRedis } from '../helpers/redis-clients.js';
import { trip } from '../helpers/trips.js';

/**
 * Concurrency counters (`windowMs` 0) in a trip: the Redis script and the memory counters of a primary
 * of `workers: N` take and free slots alike, all or nothing with the window counters of the same trip.
 */
const connect = suiteRedis();
const minute = 60_000;
const ttlMs = 3_000;

interface SlotFixture {
  /** The trips of one holder (a gateway of the fleet, a worker of the primary). */
  tripsOf(holder: string): CounterTrips;
  clock: { now: number };
}

const openRedis = (): SlotFixture & { redisTrips: (holder: string) => RedisCounterTrips } => {
  const clock = { now: 1_800_000_000_000 };
  const prefix = `test:${randomUUID()}:`;
  const redisTrips = (holder: string) =>
    new RedisCounterTrips(connect(), prefix, () => clock.now, { id: holder, ttlMs });
  return { tripsOf: redisTrips, redisTrips, clock };
};

const openMemory = (): SlotFixture & { memory: MemoryCounterTrips } => {
  const clock = { now: 1_800_000_000_000 };
  const memory = new MemoryCounterTrips(new MemoryCounterStore({ now: () => clock.now }));
  return {
    memory,
    clock,
    // As serveCounterTrips stamps the trips of each worker.
    tripsOf: (holder) => ({
      trip: (trip) => memory.trip({ ...trip, holder }),
      usage: (prefix, windowMs) => memory.usage(prefix, windowMs),
      peek: (counters) => memory.peek(counters),
    }),
  };
};

const slot = (key: string, limit: number): TripCheck => ({
  key,
  limit,
  windowMs: 0,
  cost: 1,
  need: 1,
  wanted: 0,
});

const inFlight = async (trips: CounterTrips, key: string) =>
  (await trips.peek([{ key, windowMs: 0 }]))[0]!.used;

describe.each([
  ['the Redis script', openRedis],
  ['the memory counters of a primary (workers: N)', openMemory],
])('concurrency slots on %s', (_name, open) => {
  it('takes a slot per admitted check up to the limit, refuses the next for a second, and a release frees one', async () => {
    const { tripsOf } = open();
    const [a, b] = [tripsOf('a'), tripsOf('b')];
    expect((await a.trip(trip({ checks: [slot('{c}s', 2)] }))).checks[0]).toMatchObject({
      used: 1,
      resetMs: 0,
      waitMs: 0,
    });
    expect((await b.trip(trip({ checks: [slot('{c}s', 2)] }))).checks[0]).toMatchObject({
      used: 2,
      resetMs: slotRetryMs,
    });
    const refused = await a.trip(trip({ checks: [slot('{c}s', 2)] }));
    expect(refused).toEqual({
      allowed: false,
      retryAfterMs: slotRetryMs,
      checks: [{ used: 2, resetMs: slotRetryMs, leased: 0, bucket: 0, bucketLeftMs: 0, waitMs: slotRetryMs }],
    });
    await b.trip(trip({ releases: ['{c}s'] }));
    expect(await inFlight(a, '{c}s')).toBe(1);
    expect((await a.trip(trip({ checks: [slot('{c}s', 2)] }))).allowed).toBe(true);
    expect(await a.usage('{c}', 0)).toEqual([{ key: '{c}s', used: 2, resetMs: 0 }]);
  });

  it("frees only the releasing holder's slots, never one it does not hold", async () => {
    const { tripsOf } = open();
    const [a, b] = [tripsOf('a'), tripsOf('b')];
    await a.trip(trip({ checks: [slot('{c}s', 5)] }));
    await b.trip(trip({ releases: ['{c}s', '{c}s'] }));
    expect(await inFlight(a, '{c}s')).toBe(1);
  });

  it('counts the slots a holder took while the store could not decide as its own, past the limit too, and frees them by release', async () => {
    const { tripsOf } = open();
    const [a, b] = [tripsOf('a'), tripsOf('b')];
    await a.trip(trip({ checks: [slot('{c}s', 2)] }));
    await b.trip(trip({ holds: ['{c}s', '{c}s'] }));
    expect(await inFlight(a, '{c}s')).toBe(3);
    expect((await a.trip(trip({ checks: [slot('{c}s', 2)] }))).allowed).toBe(false);
    await b.trip(trip({ releases: ['{c}s'] }));
    // a holds one: a second release of its frees nothing of b's.
    await a.trip(trip({ releases: ['{c}s', '{c}s'] }));
    expect(await inFlight(b, '{c}s')).toBe(1);
  });

  it('is all or nothing with the window counters of the trip: a refusal by either takes nothing of the other', async () => {
    const { tripsOf } = open();
    const a = tripsOf('a');
    const window = (limit: number): TripCheck => ({ ...slot('{c}w', limit), windowMs: minute });
    await a.trip(trip({ checks: [window(1)] }));
    const byWindow = await a.trip(trip({ checks: [slot('{c}s', 5), window(1)] }));
    expect(byWindow.allowed).toBe(false);
    expect(byWindow.checks[0]).toMatchObject({ used: 0, waitMs: 0 });
    expect(await inFlight(a, '{c}s')).toBe(0);

    await a.trip(trip({ checks: [slot('{c}full', 1)] }));
    const bySlot = await a.trip(trip({ checks: [window(10), slot('{c}full', 1)] }));
    expect(bySlot.allowed).toBe(false);
    expect(bySlot.retryAfterMs).toBe(slotRetryMs);
    expect((await a.peek([{ key: '{c}w', windowMs: minute }]))[0]!.used).toBe(1);
  });
});

describe('concurrency slots of a gateway of the fleet (Redis)', () => {
  it('are free once its entry goes unwritten for its time to live: a gateway that died holds none', async () => {
    const { redisTrips, clock } = openRedis();
    const [dead, live] = [redisTrips('dead'), redisTrips('live')];
    await dead.trip(trip({ checks: [slot('{c}s', 2)] }));
    await live.trip(trip({ checks: [slot('{c}s', 2)] }));
    clock.now += ttlMs - 1;
    await live.refreshSlots();
    expect((await live.trip(trip({ checks: [slot('{c}s', 2)] }))).allowed).toBe(false);
    clock.now += 1;
    expect(await inFlight(live, '{c}s')).toBe(1);
    expect((await live.trip(trip({ checks: [slot('{c}s', 2)] }))).allowed).toBe(true);
  });

  it('are written again by every heartbeat, which keeps them held for as long as the gateway lives', async () => {
    const { redisTrips, clock } = openRedis();
    const a = redisTrips('a');
    await a.trip(trip({ checks: [slot('{c}s', 1)] }));
    for (let beat = 0; beat < 5; beat += 1) {
      clock.now += 1_000;
      await a.refreshSlots();
    }
    expect(await inFlight(a, '{c}s')).toBe(1);
    await a.trip(trip({ releases: ['{c}s'] }));
    expect(await inFlight(a, '{c}s')).toBe(0);
  });
});

describe('concurrency slots of a worker (memory, workers: N)', () => {
  it('are all freed when its channel to the primary closes, however it exited, and only its own', async () => {
    const { memory, tripsOf } = openMemory();
    const channel = ipcPair();
    serveCounterTrips(new IpcPeer(channel.primary), memory, 'worker 1');
    const worker = new IpcCounterTrips(new IpcPeer(channel.worker));
    await worker.trip(trip({ checks: [slot('{c}s', 5), slot('{c}t', 5)] }));
    await worker.trip(trip({ checks: [slot('{c}s', 5)] }));
    await tripsOf('worker 2').trip(trip({ checks: [slot('{c}s', 5)] }));
    expect(await memory.usage('{c}', 0)).toEqual([
      { key: '{c}s', used: 3, resetMs: 0 },
      { key: '{c}t', used: 1, resetMs: 0 },
    ]);
    channel.close();
    expect(await memory.usage('{c}', 0)).toEqual([{ key: '{c}s', used: 1, resetMs: 0 }]);
  });
});

const tools = await clusterTools();

describe.runIf(tools)('concurrency slots on Redis Cluster', () => {
  let cluster: RedisCluster;
  let connection: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster(tools!);
    connection = new Cluster(
      cluster.urls.map((url) => ({ host: new URL(url).hostname, port: Number(new URL(url).port) })),
    );
  }, 30_000);
  afterAll(async () => {
    await connection?.quit();
    await cluster?.stop();
  });

  it('frees the slot a trip took in one slot of the cluster when its part in another refuses', async () => {
    const clock = { now: 1_800_000_000_000 };
    const trips = new RedisCounterTrips(connection, `test:${randomUUID()}:`, () => clock.now, {
      id: 'a',
      ttlMs,
    });
    const window: TripCheck = { ...slot('{app:b}w', 1), windowMs: minute };
    await trips.trip(trip({ checks: [window] }));
    const refused = await trips.trip(trip({ checks: [slot('{all}s', 5), window] }));
    expect(refused.allowed).toBe(false);
    expect(await inFlight(trips, '{all}s')).toBe(0);
    expect((await trips.trip(trip({ checks: [slot('{all}s', 5)] }))).checks[0]).toMatchObject({ used: 1 });
  });
});
