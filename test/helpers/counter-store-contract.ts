import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { CalendarPeriod } from '../../src/kit/calendar-window.js';
import type { CounterSpec, CounterStore } from '../../src/limiter/counter-store.js';

/** A store under test whose clock the test moves. */
export interface StoreFixture {
  store: CounterStore;
  clock: { now: number };
  close(): Promise<void>;
}

const second = 1000;
const throttle = (key: string, limit: number, windowMs: number): CounterSpec => ({
  key,
  limit,
  windowMs,
  cost: 1,
  need: 1,
});

const at = (iso: string): number => Date.parse(iso);
const calendar = (
  key: string,
  limit: number,
  period: CalendarPeriod,
  timeZone = 'UTC',
  startDay = 1,
): CounterSpec => ({
  ...throttle(key, limit, 0),
  // Read by no store for a calendar counter: the calendar says the window.
  windowMs: 31 * 24 * 3600 * second,
  calendar: { period, timeZone, startDay },
});

/**
 * Admits `limit` requests exactly, refuses the next, which waits until `end`; each state says the
 * window's length, `hours`.
 */
async function fill(
  store: CounterStore,
  spec: CounterSpec,
  now: number,
  end: string,
  hours: number,
): Promise<void> {
  const windowMs = hours * 3_600_000;
  for (let i = 1; i <= spec.limit; i += 1) {
    const decision = await store.consume([spec]);
    expect(decision.allowed).toBe(true);
    expect(decision.states[0]).toEqual({ used: i, resetMs: at(end) - now, windowMs, windowEnd: at(end) });
  }
  const refused = await store.consume([spec]);
  expect(refused).toMatchObject({ allowed: false, retryAfterMs: at(end) - now });
  expect(refused.states[0]).toEqual({
    used: spec.limit,
    resetMs: at(end) - now,
    windowMs,
    windowEnd: at(end),
  });
}

/** The behaviour every CounterStore must show; run once per implementation. */
export function describeCounterStoreContract(name: string, open: () => Promise<StoreFixture>): void {
  describe(`CounterStore contract: ${name}`, () => {
    const withStore = (test: (fixture: StoreFixture) => Promise<void>) => async () => {
      const fixture = await open();
      try {
        await test(fixture);
      } finally {
        await fixture.close();
      }
    };
    const key = () => `test-${randomUUID()}`;

    it(
      'admits up to the limit, rejects the next, and never counts a rejected request',
      withStore(async ({ store }) => {
        const spec = throttle(key(), 5, 60 * second);
        for (let i = 1; i <= 5; i += 1) {
          const decision = await store.consume([spec]);
          expect(decision.allowed).toBe(true);
          expect(decision.states[0]!.used).toBe(i);
        }
        for (let i = 0; i < 3; i += 1) {
          const rejected = await store.consume([spec]);
          expect(rejected.allowed).toBe(false);
          expect(rejected.states[0]!.used).toBe(5);
        }
      }),
    );

    it(
      'slides: units leave one window after they were counted, not at a fixed boundary',
      withStore(async ({ store, clock }) => {
        const spec = throttle(key(), 10, 10 * second);
        clock.now += 9_500; // late in an aligned 10 s window: a fixed window would reset in 500 ms
        for (let i = 0; i < 10; i += 1) expect((await store.consume([spec])).allowed).toBe(true);
        clock.now += 1_000;
        expect((await store.consume([spec])).allowed).toBe(false);
        clock.now += 8_000;
        expect((await store.consume([spec])).allowed).toBe(false);
        clock.now += 1_200;
        expect((await store.consume([spec])).allowed).toBe(true);
      }),
    );

    it(
      'keeps a boundary-bursting client within limit × 1.01 in every interval of one window',
      withStore(async ({ store, clock }) => {
        const limit = 100;
        const windowMs = 10 * second;
        const spec = throttle(key(), limit, windowMs);
        const admitted: number[] = [];
        const start = clock.now;
        // A greedy client: a burst of 3 × limit attempts around every aligned boundary, and a trickle between.
        for (let t = 0; t < 6 * windowMs; t += 25) {
          clock.now = start + t;
          const nearBoundary = t % windowMs > windowMs - 100 || t % windowMs < 100;
          for (let attempt = 0; attempt < (nearBoundary ? 3 * limit : 1); attempt += 1) {
            if ((await store.consume([spec])).allowed) admitted.push(clock.now);
          }
        }
        let most = 0;
        for (let i = 0, j = 0; i < admitted.length; i += 1) {
          while (admitted[i]! - admitted[j]! >= windowMs) j += 1;
          most = Math.max(most, i - j + 1);
        }
        expect(most).toBeLessThanOrEqual(limit * 1.01);
        // And it still gets the service it is owed: about the limit per window, not a lockout.
        expect(admitted.length).toBeGreaterThanOrEqual(5 * limit);
      }),
    );

    it(
      'is all or nothing: when one counter is full, none is charged',
      withStore(async ({ store }) => {
        const roomy = throttle(key(), 100, 60 * second);
        const tight = throttle(key(), 1, 60 * second);
        expect((await store.consume([roomy, tight])).allowed).toBe(true);
        const rejected = await store.consume([roomy, tight]);
        expect(rejected.allowed).toBe(false);
        expect(rejected.states.map((state) => state.used)).toEqual([1, 1]);
        expect((await store.consume([roomy])).states[0]!.used).toBe(2);
      }),
    );

    it(
      'answers when enough capacity frees up, not after a whole window',
      withStore(async ({ store, clock }) => {
        const spec = throttle(key(), 3, 10 * second);
        await store.consume([spec]);
        clock.now += 5_000;
        await store.consume([spec]);
        await store.consume([spec]);
        const rejected = await store.consume([spec]);
        expect(rejected.allowed).toBe(false);
        // The first unit leaves about 5 s from now (a window, plus at most one sub-bucket, after it came).
        expect(rejected.retryAfterMs).toBeGreaterThan(4_900);
        expect(rejected.retryAfterMs).toBeLessThanOrEqual(5_200);
        clock.now += rejected.retryAfterMs - 1;
        expect((await store.consume([spec])).allowed).toBe(false);
        clock.now += 1;
        expect((await store.consume([spec])).allowed).toBe(true);
      }),
    );

    it(
      'reports used units and the time until the oldest leave',
      withStore(async ({ store, clock }) => {
        const spec = throttle(key(), 10, 10 * second);
        const first = await store.consume([spec]);
        expect(first.states[0]!.used).toBe(1);
        expect(first.states[0]!.resetMs).toBeGreaterThan(10_000);
        expect(first.states[0]!.resetMs).toBeLessThanOrEqual(10_200);
        clock.now += 4_000;
        const later = await store.consume([spec]);
        expect(later.states[0]).toMatchObject({ used: 2 });
        expect(later.states[0]!.resetMs).toBeLessThanOrEqual(6_200);
      }),
    );

    it(
      'says for each counter that refused the wait until it has room, as Retry-After says the longest',
      withStore(async ({ store, clock }) => {
        // Sub-buckets of 100 ms and 600 ms: at the start of one, units stay counted 10.1 s and 60.6 s.
        clock.now = Math.ceil(clock.now / 60_000) * 60_000;
        const start = clock.now;
        const short = throttle(key(), 2, 10 * second);
        const long = throttle(key(), 2, 60 * second);
        const roomy = throttle(key(), 100, 60 * second);
        expect((await store.consume([short, long, roomy])).allowed).toBe(true);
        clock.now = start + 5_000;
        expect((await store.consume([short, long, roomy])).allowed).toBe(true);
        clock.now = start + 6_000;
        // Twice: decided by the store, then (with leases) by what this gateway knows is full.
        for (let i = 0; i < 2; i += 1) {
          const refused = await store.consume([short, long, roomy]);
          expect(refused.allowed).toBe(false);
          expect(refused.states.slice(0, 2).map((state) => state.resetMs)).toEqual([4_100, 54_600]);
          expect(refused.retryAfterMs).toBe(54_600);
        }

        // A need the oldest units alone would not make room for waits for the later ones to leave.
        const counter = key();
        const bytes = (need: number): CounterSpec => ({
          key: counter,
          limit: 1000,
          windowMs: 10 * second,
          cost: need,
          need,
        });
        clock.now = start + 60_000;
        await store.add([{ key: counter, windowMs: 10 * second, amount: 100 }]);
        clock.now = start + 65_000;
        await store.add([{ key: counter, windowMs: 10 * second, amount: 800 }]);
        clock.now = start + 66_000;
        const refused = await store.consume([bytes(300)]);
        expect(refused.allowed).toBe(false);
        expect([refused.states[0]!.used, refused.states[0]!.resetMs, refused.retryAfterMs]).toEqual([
          900, 9_100, 9_100,
        ]);
      }),
    );

    it(
      'counts bytes: a check needs room without charging, and additions count later',
      withStore(async ({ store }) => {
        const counter = key();
        const bytes = (need: number, cost = 0): CounterSpec => ({
          key: counter,
          limit: 1000,
          windowMs: 60 * second,
          cost,
          need,
        });
        expect((await store.consume([bytes(600, 600)])).allowed).toBe(true);
        await store.add([{ key: counter, windowMs: 60 * second, amount: 300 }]);
        expect((await store.consume([bytes(1)])).states[0]!.used).toBe(900);
        expect((await store.consume([bytes(200, 200)])).allowed).toBe(false);
        await store.add([{ key: counter, windowMs: 60 * second, amount: 100 }]);
        const full = await store.consume([bytes(1)]);
        expect(full.allowed).toBe(false);
        expect(full.states[0]!.used).toBe(1000);
      }),
    );

    it(
      'rejects a need larger than the whole limit, with a retry after one window',
      withStore(async ({ store }) => {
        const decision = await store.consume([
          { key: key(), limit: 100, windowMs: 10 * second, cost: 500, need: 500 },
        ]);
        expect(decision.allowed).toBe(false);
        expect(decision.retryAfterMs).toBeGreaterThanOrEqual(10 * second);
      }),
    );

    it(
      'forgets everything after a long idle time',
      withStore(async ({ store, clock }) => {
        const spec = throttle(key(), 2, 10 * second);
        await store.consume([spec]);
        await store.consume([spec]);
        clock.now += 7 * 24 * 3600 * second;
        const decision = await store.consume([spec]);
        expect(decision.allowed).toBe(true);
        expect(decision.states[0]!.used).toBe(1);
      }),
    );

    it(
      'lists the usage of counters by key prefix, with the time until their oldest units leave',
      withStore(async ({ store, clock }) => {
        const prefix = `${key()}:`;
        const bucketMs = 600; // a 60 s window in 100 sub-buckets
        await store.consume([throttle(`${prefix}a`, 10, 60 * second)]);
        const firstBucket = Math.floor(clock.now / bucketMs);
        clock.now += 20 * second;
        await store.consume([throttle(`${prefix}b`, 10, 60 * second)]);
        await store.consume([throttle(`${prefix}b`, 10, 60 * second)]);
        const laterBucket = Math.floor(clock.now / bucketMs);
        clock.now += 5 * second;
        const usage = await store.usage(prefix, 60 * second);
        // The oldest units leave when their sub-bucket does: 101 sub-buckets after it began.
        expect(usage.sort((x, y) => x.key.localeCompare(y.key))).toEqual([
          { key: `${prefix}a`, used: 1, resetMs: (firstBucket + 101) * bucketMs - clock.now },
          { key: `${prefix}b`, used: 2, resetMs: (laterBucket + 101) * bucketMs - clock.now },
        ]);
      }),
    );

    it(
      'reads named counters without charging them, and an unknown one as empty',
      withStore(async ({ store, clock }) => {
        const counted = throttle(key(), 3, 60 * second);
        await store.consume([counted]);
        await store.consume([counted]);
        const bucketMs = 600;
        const firstBucket = Math.floor(clock.now / bucketMs);
        const refs = [
          { key: counted.key, windowMs: 60 * second },
          { key: key(), windowMs: 60 * second },
        ];
        for (let i = 0; i < 3; i += 1) {
          expect(await store.peek(refs)).toEqual([
            { used: 2, resetMs: (firstBucket + 101) * bucketMs - clock.now },
            { used: 0, resetMs: 0 },
          ]);
        }
        expect((await store.consume([counted])).states[0]!.used).toBe(3);
      }),
    );

    it(
      'counts a calendar month from its start: the limit and not one more, the whole limit again at its end',
      withStore(async ({ store, clock }) => {
        const spec = calendar(key(), 5, 'month');
        clock.now = at('2026-11-30T23:59:00Z');
        await fill(store, spec, clock.now, '2026-12-01T00:00:00Z', 30 * 24);
        clock.now = at('2026-12-01T00:00:00Z') - 1;
        expect((await store.consume([spec])).allowed).toBe(false);
        clock.now += 1;
        await fill(store, spec, clock.now, '2027-01-01T00:00:00Z', 31 * 24);
      }),
    );

    it(
      'counts a billing month on February 29 of a leap year, and starts the next on March 28',
      withStore(async ({ store, clock }) => {
        const spec = calendar(key(), 3, 'month', 'UTC', 28);
        clock.now = at('2028-02-29T12:00:00Z');
        await fill(store, spec, clock.now, '2028-03-28T00:00:00Z', 29 * 24);
        clock.now = at('2028-03-27T23:59:59.999Z');
        expect((await store.consume([spec])).allowed).toBe(false);
        clock.now = at('2028-03-28T00:00:00Z');
        await fill(store, spec, clock.now, '2028-04-28T00:00:00Z', 31 * 24);
      }),
    );

    it(
      'counts a leap day as a day of its own',
      withStore(async ({ store, clock }) => {
        const spec = calendar(key(), 4, 'day');
        clock.now = at('2028-02-29T00:00:00Z');
        await fill(store, spec, clock.now, '2028-03-01T00:00:00Z', 24);
        clock.now = at('2028-03-01T00:00:00Z');
        await fill(store, spec, clock.now, '2028-03-02T00:00:00Z', 24);
      }),
    );

    it(
      "resets a day at its time zone's midnight: Kolkata's is 18:30 UTC",
      withStore(async ({ store, clock }) => {
        const spec = calendar(key(), 2, 'day', 'Asia/Kolkata');
        clock.now = at('2026-06-15T18:29:00Z');
        await fill(store, spec, clock.now, '2026-06-15T18:30:00Z', 24);
        clock.now = at('2026-06-15T18:30:00Z');
        await fill(store, spec, clock.now, '2026-06-16T18:30:00Z', 24);
      }),
    );

    it(
      'counts a 25-hour day when New York falls back, and a 23-hour one when it springs forward',
      withStore(async ({ store, clock }) => {
        const spec = calendar(key(), 3, 'day', 'America/New_York');
        clock.now = at('2026-11-01T04:00:00Z');
        await fill(store, spec, clock.now, '2026-11-02T05:00:00Z', 25);
        // 24 hours after its midnight, the day of the change is still on (23:00 in New York).
        clock.now = at('2026-11-02T04:00:00Z');
        expect(await store.consume([spec])).toMatchObject({ allowed: false, retryAfterMs: 3_600_000 });
        clock.now = at('2026-11-02T05:00:00Z');
        await fill(store, spec, clock.now, '2026-11-03T05:00:00Z', 24);
        clock.now = at('2026-03-08T05:00:00Z');
        await fill(store, spec, clock.now, '2026-03-09T04:00:00Z', 23);
        clock.now = at('2026-03-09T04:00:00Z');
        await fill(store, spec, clock.now, '2026-03-10T04:00:00Z', 24);
      }),
    );

    it(
      'adds measured units to the window of now, and reads a calendar counter in it',
      withStore(async ({ store, clock }) => {
        const spec = { ...calendar(key(), 100, 'year'), cost: 0 };
        clock.now = at('2026-12-31T23:00:00Z');
        await store.add([{ key: spec.key, windowMs: spec.windowMs, calendar: spec.calendar!, amount: 60 }]);
        const ref = { key: spec.key, windowMs: spec.windowMs, calendar: spec.calendar! };
        expect(await store.peek([ref])).toEqual([
          {
            used: 60,
            resetMs: 3_600_000,
            windowMs: 365 * 24 * 3_600_000,
            windowEnd: at('2027-01-01T00:00:00Z'),
          },
        ]);
        expect((await store.consume([{ ...spec, need: 41 }])).allowed).toBe(false);
        clock.now = at('2027-01-01T00:00:00Z');
        await store.add([{ key: spec.key, windowMs: spec.windowMs, calendar: spec.calendar!, amount: 7 }]);
        expect(await store.peek([ref])).toEqual([
          {
            used: 7,
            resetMs: 365 * 24 * 3_600_000,
            windowMs: 365 * 24 * 3_600_000,
            windowEnd: at('2028-01-01T00:00:00Z'),
          },
        ]);
      }),
    );
  });
}
