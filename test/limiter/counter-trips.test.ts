import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/kit/clock.js';
import { bucketMsOf, type CounterAddition } from '../../src/limiter/counter-store.js';
import type { CounterTrips, GiveBack, TripCheck, TripReply } from '../../src/limiter/counter-trips.js';
import { IpcCounterTrips, serveCounterTrips } from '../../src/workers/ipc-counter-trips.js';
import { counterReservation, MemoryCounterStore } from '../../src/limiter/memory-counter-store.js';
import { MemoryCounterTrips } from '../../src/limiter/memory-counter-trips.js';
import { RedisCounterTrips } from '../../src/stores/redis-counter-trips.js';
import { SharedCounterStore } from '../../src/limiter/shared-counter-store.js';
import { IpcPeer } from '../../src/workers/ipc-peer.js';
import { suiteRedis } from '../helpers/redis-clients.js';
import { trip } from '../helpers/trips.js';
import { ipcPair } from '../helpers/ipc-pair.js';
import { describeCounterStoreContract } from '../helpers/counter-store-contract.js';

/**
 * The trips of the lease protocol, one by one: the Redis script (lua/consume.lua) and the memory counters
 * a primary of `workers: N` holds for its workers must answer every trip alike.
 */
const connect = suiteRedis();
const minute = 60_000;
const bucketMs = bucketMsOf(minute);
/** A time at the start of a sub-bucket of a minute's window. */
const bucketStart = Math.ceil(1_800_000_000_000 / bucketMs) * bucketMs;

interface TripsFixture {
  trips: CounterTrips;
  clock: { now: number };
}

const openRedis = (): TripsFixture => {
  const clock = { now: bucketStart };
  return { trips: new RedisCounterTrips(connect(), `test:${randomUUID()}:`, () => clock.now), clock };
};

const openMemory = (): TripsFixture => {
  const clock = { now: bucketStart };
  return { trips: new MemoryCounterTrips(new MemoryCounterStore({ now: () => clock.now })), clock };
};

const check = (key: string, limit: number, wanted = 0, extra: Partial<TripCheck> = {}): TripCheck => ({
  key,
  limit,
  windowMs: minute,
  cost: 1,
  need: 1,
  wanted,
  ...extra,
});

describe.each([
  ['the Redis script', openRedis],
  ['the memory counters of a primary (workers: N)', openMemory],
])('one trip to %s', (_name, open) => {
  it('charges the cost and a lease of what was wanted, scaled to what is left of the sub-bucket', async () => {
    const { trips, clock } = open();
    clock.now = bucketStart + bucketMs / 4;
    const reply = await trips.trip(trip({ checks: [check('k', 1_000_000, 400)] }));
    expect(reply).toEqual({
      allowed: true,
      retryAfterMs: 0,
      checks: [
        {
          used: 1 + 300,
          resetMs: minute + bucketMs - bucketMs / 4,
          leased: 300,
          bucket: bucketStart / bucketMs,
          bucketLeftMs: (bucketMs * 3) / 4,
          waitMs: 0,
        },
      ],
    });
  });

  it("never leases more than this gateway's part of one sub-bucket's rate, or of the room left", async () => {
    const { trips } = open();
    // 1,000 a minute over 2 gateways: 1000 / 100 / 2 = 5 units a sub-bucket each.
    const rate = await trips.trip(trip({ checks: [check('rate', 1_000, 100)], live: 2 }));
    expect(rate.checks[0]).toMatchObject({ used: 6, leased: 5 });
    // 4 units of room after the cost, over 2 gateways: 2 each.
    await trips.trip(trip({ additions: [{ key: 'room', windowMs: minute, amount: 995 }] }));
    const room = await trips.trip(trip({ checks: [check('room', 1_000, 100)], live: 2 }));
    expect(room.checks[0]).toMatchObject({ used: 998, leased: 2 });
    // A limit under 100 a window per gateway is never leased.
    const small = await trips.trip(trip({ checks: [check('small', 99, 100)] }));
    expect(small.checks[0]).toMatchObject({ used: 1, leased: 0 });
  });

  it('is all or nothing: one full counter refuses every check, charges none, and says how long to wait', async () => {
    const { trips, clock } = open();
    await trips.trip(trip({ checks: [check('tight', 2)] }));
    clock.now += 10_000;
    await trips.trip(trip({ checks: [check('tight', 2)] }));
    const refused = await trips.trip(trip({ checks: [check('roomy', 100, 50), check('tight', 2)] }));
    expect(refused.allowed).toBe(false);
    expect(refused.checks.map(({ used, leased }) => ({ used, leased }))).toEqual([
      { used: 0, leased: 0 },
      { used: 2, leased: 0 },
    ]);
    // The first unit leaves one window and a sub-bucket after its sub-bucket began.
    expect(refused.checks[1]!.waitMs).toBe(minute + bucketMs - 10_000);
    expect(refused.checks[0]!.waitMs).toBe(0);
    expect(refused.retryAfterMs).toBe(refused.checks[1]!.waitMs);
  });

  it('adds the measured units before it checks', async () => {
    const { trips } = open();
    const reply = await trips.trip(
      trip({
        additions: [{ key: 'bytes', windowMs: minute, amount: 1_000 }],
        checks: [check('bytes', 1_000)],
      }),
    );
    expect(reply).toMatchObject({ allowed: false, checks: [{ used: 1_000, waitMs: minute + bucketMs }] });
  });

  it('gives units back to the sub-bucket they were charged to, and never once it has left the window', async () => {
    const { trips, clock } = open();
    const leased = await trips.trip(trip({ checks: [check('k', 1_000_000, 60)] }));
    const { bucket, leased: units } = leased.checks[0]!;
    expect(units).toBe(60);
    clock.now += 3 * bucketMs;
    const back: GiveBack = { key: 'k', windowMs: minute, bucket, units };
    const after = await trips.trip(trip({ giveBacks: [back], checks: [check('k', 1_000_000)] }));
    expect(after.checks[0]!.used).toBe(2);
    // A give-back to a sub-bucket that has left the window changes nothing.
    const old = await trips.trip(trip({ checks: [check('old', 1_000_000, 60)] }));
    clock.now += minute + 2 * bucketMs;
    const late = await trips.trip(
      trip({
        giveBacks: [{ key: 'old', windowMs: minute, bucket: old.checks[0]!.bucket, units: 60 }],
        checks: [check('old', 1_000_000)],
      }),
    );
    expect(late.checks[0]!.used).toBe(1);
  });

  it('waits one window and a sub-bucket for a need larger than the whole limit', async () => {
    const { trips } = open();
    const reply = await trips.trip(trip({ checks: [check('huge', 10, 0, { need: 11, cost: 11 })] }));
    expect(reply).toMatchObject({ allowed: false, retryAfterMs: minute + bucketMs });
  });

  it('lists usage by key prefix, leases included', async () => {
    const { trips } = open();
    await trips.trip(trip({ checks: [check('p:a', 1_000_000, 10), check('p:b', 10)] }));
    const usage = await trips.usage('p:', minute);
    expect(usage.sort((x, y) => x.key.localeCompare(y.key))).toMatchObject([
      { key: 'p:a', used: 11 },
      { key: 'p:b', used: 1 },
    ]);
  });
});

/** A small deterministic generator (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

describe('the memory counters of a primary against the Redis script', () => {
  it.each([1, 2, 3])(
    'answer a random run of trips (seed %i) as the script does, fields for fields',
    async (seed) => {
      const next = random(seed);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
      const redis = openRedis();
      const memory = openMemory();
      const counters = [
        { key: 'a', limit: 50, windowMs: 10_000 },
        { key: 'b', limit: 5_000, windowMs: 10_000 },
        { key: 'c', limit: 300, windowMs: minute },
        { key: 'd', limit: 1_000_000, windowMs: 1_000 },
      ];
      /** Leases granted so far, to give back part of them later, as gateways do. */
      const leases: GiveBack[] = [];
      const seen = { refused: 0, leased: 0, givenBack: 0 };
      for (let step = 0; step < 600; step += 1) {
        const advance = pick([0, 1, 7, 40, 250, 1_300, 11_000]);
        redis.clock.now += advance;
        memory.clock.now += advance;
        const checks = counters
          .filter(() => next() < 0.5)
          .map(({ key, limit, windowMs }) => {
            const need = pick([1, 1, 1, 5, 60]);
            return { key, limit, windowMs, need, cost: pick([need, 0]), wanted: pick([0, 3, 40, 900]) };
          });
        const additions: CounterAddition[] = counters
          .filter(() => next() < 0.15)
          .map(({ key, windowMs }) => ({ key, windowMs, amount: pick([1, 30, 400]) }));
        const giveBacks = leases
          .splice(0, next() < 0.3 ? leases.length : 0)
          .map((lease) => ({ ...lease, units: Math.ceil(lease.units * pick([0.25, 1, 2])) }));
        const sent = trip({ checks, additions, giveBacks, live: pick([1, 2, 3]) });
        seen.givenBack += giveBacks.length;
        const [fromRedis, fromMemory] = await Promise.all([redis.trips.trip(sent), memory.trips.trip(sent)]);
        expect(withoutReset(fromMemory), `step ${step}`).toEqual(withoutReset(fromRedis));
        // The script keeps the oldest bucket a give-back emptied as the counter's oldest; memory finds the
        // next one that holds units. So its reset is exact, and never sooner than the script's.
        fromMemory.checks.forEach((checked, i) =>
          expect(checked.resetMs, `step ${step}`).toBeGreaterThanOrEqual(fromRedis.checks[i]!.resetMs),
        );
        if (!fromRedis.allowed) seen.refused += 1;
        fromRedis.checks.forEach((checked, i) => {
          if (checked.leased > 0) seen.leased += 1;
          if (checked.leased > 0)
            leases.push({
              key: checks[i]!.key,
              windowMs: checks[i]!.windowMs,
              bucket: checked.bucket,
              units: checked.leased,
            });
        });
      }
      // The run went through refusals, leases and give-backs, not only easy admissions.
      expect(seen.refused).toBeGreaterThan(20);
      expect(seen.leased).toBeGreaterThan(20);
      expect(seen.givenBack).toBeGreaterThan(20);
    },
    30_000,
  );
});

function withoutReset(reply: TripReply) {
  return { ...reply, checks: reply.checks.map(({ resetMs: _resetMs, ...rest }) => rest) };
}

/** A clock for SharedCounterStore whose give-back timer never fires: expired leases travel with trips. */
const noTimers = (clock: { now: number }): Clock => ({
  now: () => clock.now,
  monotonic: () => clock.now,
  setTimeout: () => null,
  clearTimeout: () => undefined,
});

describeCounterStoreContract('the memory counters of a primary, reached by a worker over IPC', async () => {
  const clock = { now: 1_800_000_000_000 };
  const channel = ipcPair();
  serveCounterTrips(
    new IpcPeer(channel.primary),
    new MemoryCounterTrips(new MemoryCounterStore({ now: () => clock.now })),
    'worker 1',
  );
  const store = new SharedCounterStore({
    trips: new IpcCounterTrips(new IpcPeer(channel.worker)),
    clock: noTimers(clock),
    live: () => 2,
  });
  return {
    store,
    clock,
    close: async () => {
      await store.close();
      channel.close();
    },
  };
});

describe("the primary's memory bound, as a worker meets it", () => {
  const key = (i: number) => `caller-${String(i).padStart(4, '0')}`;

  it('refuses a check that needs a counter past the bound as out of room, charging nothing, and still applies give-backs and additions', async () => {
    const clock = { now: bucketStart };
    let full = 0;
    const counters = new MemoryCounterStore({
      now: () => clock.now,
      maxBytes: 2 * counterReservation(key(0)),
      onFull: () => (full += 1),
    });
    const trips = new MemoryCounterTrips(counters);
    const first = await trips.trip(trip({ checks: [check(key(0), 1_000_000, 100)] }));
    await trips.trip(trip({ checks: [check(key(1), 10)] }));
    const refused = await trips.trip(
      trip({
        checks: [check(key(0), 1_000_000), check(key(2), 10)],
        additions: [{ key: key(1), windowMs: minute, amount: 5 }],
        giveBacks: [{ key: key(0), windowMs: minute, bucket: first.checks[0]!.bucket, units: 100 }],
      }),
    );
    expect(refused).toMatchObject({ allowed: false, outOfRoom: true, checks: [] });
    expect(full).toBe(1);
    // A worker's shadow check finds no room without taking any, and is no refusal; an enforced one takes
    // the room of a shadow count.
    const shadow = { ...check(key(3), 10), shadow: true as const };
    expect(await trips.trip(trip({ checks: [shadow] }))).toMatchObject({ outOfRoom: true });
    expect(full).toBe(1);
    expect(
      (await counters.usage('caller-', minute)).sort((x, y) => x.key.localeCompare(y.key)),
    ).toMatchObject([
      { key: key(0), used: 1 },
      { key: key(1), used: 6 },
    ]);
  });

  it("answers a worker's check past the bound as out of room (503), not as over quota, over IPC", async () => {
    const clock = { now: bucketStart };
    const channel = ipcPair();
    serveCounterTrips(
      new IpcPeer(channel.primary),
      new MemoryCounterTrips(
        new MemoryCounterStore({ now: () => clock.now, maxBytes: counterReservation(key(0)) }),
      ),
      'worker 1',
    );
    const store = new SharedCounterStore({
      trips: new IpcCounterTrips(new IpcPeer(channel.worker)),
      clock: noTimers(clock),
      live: () => 2,
    });
    expect((await store.consume([check(key(0), 10)])).allowed).toBe(true);
    expect(await store.consume([check(key(0), 10), check(key(1), 10)])).toEqual({
      allowed: false,
      retryAfterMs: 60_000,
      states: [],
      outOfRoom: true,
    });
    // Nothing of the refused check was charged, and the counter is not taken for full.
    expect((await store.consume([check(key(0), 10)])).states[0]!.used).toBe(2);
    channel.close();
  });
});
