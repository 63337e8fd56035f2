import {
  bucketMsOf,
  bucketsPerWindow,
  isSlotCounter,
  slotRetryMs,
  type CounterAddition,
  type CounterRef,
  type CounterSpec,
  type CounterState,
  type CounterStore,
  type CounterUsage,
  type Decision,
  type SlotRelease,
} from './counter-store.js';
import type { CheckedCounter, GiveBack, Trip, TripCheck, TripReply } from './counter-trips.js';
import { systemClock } from '../kit/clock.js';
import { CalendarCounters, calendarCheck, calendarDecision, calendarState } from './calendar-counters.js';

interface Counter {
  total: number;
  /** Bucket index of `buckets[0]`. */
  oldest: number;
  /** Units per sub-bucket from `oldest` on; empty when `total` is 0, else `buckets[0]` holds units. */
  buckets: number[];
  /** Idle counters are dropped after this time. */
  expiresAt: number;
  /** Bytes reserved for this counter against the store's bound (`counterReservation`). */
  reserved: number;
  /** Made by a shadow check and used by no enforced one since: the first to go at the bound. */
  shadow: boolean;
}

/** The requests in flight under one concurrency counter, in all and by holder. */
interface Slots {
  total: number;
  /** `''` for this process's own requests; a worker's id for those the primary holds for it. */
  byHolder: Map<string, number>;
}

/** The holder of the slots this process's own `consume` takes. */
const ownHolder = '';

const sweepEveryMs = 60_000;
/** While the bound is reached, expired counters are looked for at most this often. */
const sweepWhenFullEveryMs = 1_000;

/**
 * Bytes a counter may take at most on the heap, measured on Node 20 (x64): the counter object and its
 * Map entry, and a bucket array holding a whole window (101 doubles in an array grown to 131), plus the
 * key at two bytes a character. Reserved in full when the counter is made, so the bound holds however
 * the counters held fill their windows later.
 */
export function counterReservation(key: string): number {
  return 1_600 + 2 * key.length;
}

export interface MemoryCounterStoreOptions {
  /** Milliseconds; tests move it instead of sleeping. */
  now?: () => number;
  /** Bytes the counters may reserve together (`store.maxCounterMemoryMb`); no bound when absent. */
  maxBytes?: number;
  /** Called when an enforced check is refused because a new counter would pass `maxBytes`. */
  onFull?: () => void;
  /** Called for each shadow count dropped to make room for an enforced check's new counter. */
  onShadowDropped?: () => void;
}

/**
 * `store.type: "memory"`: the counters of one gateway process, with the same sliding-window semantics as
 * the Redis store. Time comes from `now` (milliseconds), so tests move it instead of sleeping.
 *
 * Memory is bounded: each counter reserves its worst case (`counterReservation`) when it is made, and a
 * request that needs a new counter beyond `maxBytes` is refused (`outOfRoom`) without being charged.
 * Counters of enforced restrictions already held are never dropped to make room, and keep counting:
 * only idle ones expire. Shadow counts give way: an enforced check that finds no room drops them, oldest
 * first, and a shadow check never drops anything, so a shadow restriction never lowers what the
 * enforced ones serve (it stops counting first).
 */
export class MemoryCounterStore implements CounterStore, SlotRelease {
  private readonly counters = new Map<string, Counter>();
  /**
   * Concurrency counters: requests in flight, never swept (a request in flight is no idle counter) and
   * outside the memory bound (at most one entry per request in flight); gone when their last slot is.
   */
  private readonly slots = new Map<string, Slots>();
  /** The keys of the shadow counts held, oldest first. */
  private readonly shadowKeys = new Set<string>();
  private readonly now: () => number;
  /** Calendar counters, in the windows of this store's clock. */
  private readonly calendars = new CalendarCounters();
  private readonly maxBytes: number;
  private reservedBytes = 0;
  private lastSweep: number;
  private lastSweepWhenFull = -Infinity;

  constructor(private readonly options: MemoryCounterStoreOptions = {}) {
    this.now = options.now ?? systemClock.now;
    this.maxBytes = options.maxBytes ?? Infinity;
    this.lastSweep = this.now();
  }

  /** Bytes reserved by the counters held now. */
  get reserved(): number {
    return this.reservedBytes;
  }

  consume(counters: readonly CounterSpec[]): Decision {
    const now = this.now();
    const specs = this.calendars.inWindow(counters, now);
    return specs === counters
      ? this.decide(specs, now)
      : calendarDecision(specs, this.decide(specs, now), now);
  }

  private decide(specs: readonly CounterSpec[], now: number): Decision {
    this.sweep(now);
    if (!this.roomFor(specs, now))
      return { allowed: false, retryAfterMs: sweepEveryMs, states: [], outOfRoom: true };
    // Loops rather than map/some over the specs: this runs for every request of the memory store.
    const counters: Array<Counter | null> = new Array<Counter | null>(specs.length);
    let full = false;
    let slotted = false;
    for (let i = 0; i < specs.length; i += 1) {
      const spec = specs[i]!;
      if (isSlotCounter(spec.windowMs)) {
        slotted = true;
        counters[i] = null;
        if (this.inFlight(spec.key) + spec.need > spec.limit) full = true;
        continue;
      }
      const counter = this.checked(spec, now);
      counters[i] = counter;
      if (counter.total + spec.need > spec.limit) full = true;
    }
    let retryAfterMs = 0;
    const states: CounterState[] = new Array<CounterState>(specs.length);
    for (let i = 0; i < specs.length; i += 1) {
      const spec = specs[i]!;
      const counter = counters[i]!;
      if (counter === null) {
        if (!full) this.takeSlot(spec.key, ownHolder);
        const state = this.slotState(spec);
        if (full && state.used + spec.need > spec.limit) retryAfterMs = Math.max(retryAfterMs, slotRetryMs);
        states[i] = state;
        continue;
      }
      if (!full) this.charge(counter, spec.windowMs, spec.cost, now);
      else if (counter.total + spec.need > spec.limit) {
        const waitMs = this.waitFor(counter, spec, now);
        retryAfterMs = Math.max(retryAfterMs, waitMs);
        states[i] = { used: counter.total, resetMs: waitMs };
        continue;
      }
      states[i] = this.state(counter, spec.windowMs, now);
    }
    return slotted && !full
      ? { allowed: true, retryAfterMs, states, slotsFreedBy: this }
      : { allowed: !full, retryAfterMs, states };
  }

  /** Frees one slot of each key that this process's own `consume` took. */
  release(keys: readonly string[]): void {
    for (const key of keys) this.freeSlot(key, ownHolder);
  }

  /**
   * Counts slots of requests this process has in flight that another store took (the fleet's), without
   * a check: so that when this store decides alone (`onError: local`), it counts them against its share.
   * Freed by `release`, as its own are.
   */
  hold(keys: readonly string[]): void {
    for (const key of keys) this.takeSlot(key, ownHolder);
  }

  /** Frees every slot `holder` holds: a worker that exited ends no request of its own any more. */
  releaseAll(holder: string): void {
    for (const [key, slots] of this.slots) {
      const held = slots.byHolder.get(holder);
      if (held === undefined) continue;
      slots.total -= held;
      slots.byHolder.delete(holder);
      if (slots.total <= 0) this.slots.delete(key);
    }
  }

  /** Adds measured units. Never refused: these are bytes of requests already admitted. */
  add(additions: readonly CounterAddition[]): void {
    const now = this.now();
    this.addNow(this.calendars.inWindow(additions, now), now);
  }

  /**
   * One trip of the lease protocol (`CounterTrips`), for the workers of `workers: N`, with the semantics
   * of lua/consume.lua on these counters and this store's clock: give-backs leave the sub-bucket they
   * were charged to, additions are charged, then every check is checked and, only if all have room,
   * charged its cost plus a lease of at most `wanted` scaled to what is left of the sub-bucket, and at
   * most this worker's part of one sub-bucket's steady rate (limit ÷ 100 ÷ live) and of the room left
   * (room ÷ live). Beyond the script, the memory bound holds: a check that needs a counter past it is
   * refused (`outOfRoom`), its give-backs and additions still applied.
   */
  trip(trip: Trip): TripReply {
    const now = this.now();
    this.sweep(now);
    for (const giveBack of trip.giveBacks) this.giveBack(giveBack, now);
    this.addNow(trip.additions, now);
    const holder = trip.holder ?? ownHolder;
    for (const key of trip.releases ?? []) this.freeSlot(key, holder);
    for (const key of trip.holds ?? []) this.takeSlot(key, holder);
    const checks = this.calendars.inWindow(trip.checks, now);
    if (!this.roomFor(checks, now))
      return { allowed: false, retryAfterMs: sweepEveryMs, checks: [], outOfRoom: true };
    const counters = checks.map((check) => (isSlotCounter(check.windowMs) ? null : this.checked(check, now)));
    const allowed = checks.every(
      (check, i) => (counters[i]?.total ?? this.inFlight(check.key)) + check.need <= check.limit,
    );
    const live = Math.max(1, trip.live);
    let retryAfterMs = 0;
    const replies = checks.map((check, i): CheckedCounter => {
      const counter = counters[i];
      if (!counter) {
        if (allowed) this.takeSlot(check.key, holder);
        const state = this.slotState(check);
        const waitMs = !allowed && state.used + check.need > check.limit ? slotRetryMs : 0;
        retryAfterMs = Math.max(retryAfterMs, waitMs);
        return { ...state, leased: 0, bucket: 0, bucketLeftMs: 0, waitMs };
      }
      const bucketMs = bucketMsOf(check.windowMs);
      const bucket = Math.floor(now / bucketMs);
      let leased = 0;
      let waitMs = 0;
      if (allowed) {
        leased = this.leaseSize(check, counter.total, bucket, live, now);
        if (check.cost + leased > 0) this.charge(counter, check.windowMs, check.cost + leased, now);
      } else if (counter.total + check.need > check.limit) {
        waitMs = this.waitFor(counter, check, now);
        retryAfterMs = Math.max(retryAfterMs, waitMs);
      }
      const reply = {
        ...this.state(counter, check.windowMs, now),
        leased,
        bucket,
        bucketLeftMs: (bucket + 1) * bucketMs - now,
        waitMs,
      };
      return calendarCheck(check, reply, now, now);
    });
    return { allowed, retryAfterMs, checks: replies };
  }

  /**
   * Charges units counted elsewhere as of the time `at` each was counted by (never later than now), so
   * that they leave the window when units charged then would; those already out of it are not charged.
   */
  seed(seeds: ReadonlyArray<CounterAddition & { at: number }>): void {
    const now = this.now();
    for (const { key, windowMs, amount, at } of seeds) {
      const countedAt = Math.min(at, now);
      const bucketMs = bucketMsOf(windowMs);
      if (amount <= 0 || Math.floor(countedAt / bucketMs) < Math.floor(now / bucketMs) - bucketsPerWindow)
        continue;
      this.charge(this.current(key, windowMs, now), windowMs, amount, countedAt);
    }
  }

  async usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]> {
    if (isSlotCounter(windowMs)) {
      return [...this.slots]
        .filter(([key, slots]) => key.startsWith(keyPrefix) && slots.total > 0)
        .map(([key, slots]) => ({ key, used: slots.total, resetMs: 0 }));
    }
    const now = this.now();
    return [...this.counters.keys()]
      .filter((key) => key.startsWith(keyPrefix))
      .map((key) => ({ key, ...this.state(this.current(key, windowMs, now), windowMs, now) }))
      .filter(({ used }) => used > 0);
  }

  async peek(refs: readonly CounterRef[]): Promise<CounterState[]> {
    const now = this.now();
    return this.calendars.inWindow(refs, now).map((ref) => {
      const { key, windowMs } = ref;
      const inCalendar = calendarState(
        ref,
        this.counters.has(key) ? this.current(key, windowMs, now).total : 0,
        now,
      );
      if (inCalendar) return inCalendar;
      if (isSlotCounter(windowMs)) return { used: this.inFlight(key), resetMs: 0 };
      const counter = this.counters.get(key);
      return counter ? this.state(this.current(key, windowMs, now), windowMs, now) : { used: 0, resetMs: 0 };
    });
  }

  /** Adds measured units at `now`. Never refused: these are bytes of requests already admitted. */
  private addNow(additions: readonly CounterAddition[], now: number): void {
    for (const { key, windowMs, amount } of additions) {
      if (amount > 0) this.charge(this.current(key, windowMs, now), windowMs, amount, now);
    }
  }

  /**
   * Units of a lease that were never spent leave the sub-bucket they were charged to, if it is still
   * counted; a counter left empty is dropped, as the script deletes its key.
   */
  private giveBack({ key, windowMs, bucket, units }: GiveBack, now: number): void {
    const counter = this.counters.get(key);
    if (!counter || bucket < Math.floor(now / bucketMsOf(windowMs)) - bucketsPerWindow) return;
    const position = bucket - counter.oldest;
    const held = counter.buckets[position];
    if (held === undefined || held <= 0) return;
    const back = Math.min(held, units);
    counter.buckets[position] = held - back;
    counter.total -= back;
    if (counter.total <= 0) {
      counter.total = 0;
      counter.buckets.length = 0;
    }
  }

  /**
   * The units of a lease granted with an admitted check: `wanted` over a whole sub-bucket, scaled to what
   * is left of this one, and never more than this worker's part of one sub-bucket's steady rate or of the
   * room left, so that small limits stay one unit per trip. `total` is the counter's before the charge.
   */
  private leaseSize(check: TripCheck, total: number, bucket: number, live: number, now: number): number {
    if (check.wanted <= 0) return 0;
    const bucketMs = bucketMsOf(check.windowMs);
    const bucketLeft = (bucket + 1) * bucketMs - now;
    const wantedNow = Math.floor((check.wanted * bucketLeft) / bucketMs);
    const fair = Math.floor(
      Math.min(check.limit / (bucketsPerWindow * live), (check.limit - total - check.cost) / live),
    );
    return Math.max(0, Math.min(wantedNow, fair));
  }

  /**
   * Milliseconds until enough of the oldest buckets leave the window for `check.need` to fit, as the
   * script reckons it: one whole window and a sub-bucket when the need is larger than the limit (windows
   * are whole seconds, so a sub-bucket is exactly a hundredth of one).
   */
  private waitFor(counter: Counter, check: CounterSpec, now: number): number {
    const bucketMs = bucketMsOf(check.windowMs);
    const never = (bucketsPerWindow + 1) * bucketMs;
    if (check.need > check.limit) return never;
    let excess = counter.total + check.need - check.limit;
    for (let i = 0; i < counter.buckets.length; i += 1) {
      excess -= counter.buckets[i]!;
      if (excess <= 0) return (counter.oldest + i + bucketsPerWindow + 1) * bucketMs - now;
    }
    return never;
  }

  /**
   * Forgets every counter of a window: a fallback starts again from its seeds. The slots of requests
   * still in flight stay held: they are freed when those requests end.
   */
  clear(): void {
    this.counters.clear();
    this.shadowKeys.clear();
    this.reservedBytes = 0;
  }

  /** Requests in flight under a concurrency counter. */
  private inFlight(key: string): number {
    return this.slots.get(key)?.total ?? 0;
  }

  private takeSlot(key: string, holder: string): void {
    let slots = this.slots.get(key);
    if (!slots) this.slots.set(key, (slots = { total: 0, byHolder: new Map() }));
    slots.total += 1;
    slots.byHolder.set(holder, (slots.byHolder.get(holder) ?? 0) + 1);
  }

  /** Frees one slot of `holder`'s, if it holds one (a slot is never freed twice, nor another's). */
  private freeSlot(key: string, holder: string): void {
    const slots = this.slots.get(key);
    const held = slots?.byHolder.get(holder);
    if (!slots || held === undefined) return;
    if (held <= 1) slots.byHolder.delete(holder);
    else slots.byHolder.set(holder, held - 1);
    slots.total -= 1;
    if (slots.total <= 0) this.slots.delete(key);
  }

  /** A concurrency counter's state: full, it says a slot may be free in `slotRetryMs`. */
  private slotState(spec: CounterSpec): CounterState {
    const used = this.inFlight(spec.key);
    return { used, resetMs: used >= spec.limit ? slotRetryMs : 0 };
  }

  /** Forgets every counter and every slot held. */
  async close(): Promise<void> {
    this.clear();
    this.slots.clear();
  }

  /**
   * Whether the counters `specs` would add fit in the bound. When they would not, expired counters are
   * swept (at most once a second), then, for a check with an enforced spec, shadow counts are dropped;
   * an enforced check that still finds no room is reported (`onFull`).
   */
  private roomFor(specs: readonly CounterSpec[], now: number): boolean {
    if (this.maxBytes === Infinity || this.fits(specs)) return true;
    if (now - this.lastSweepWhenFull >= sweepWhenFullEveryMs) {
      this.lastSweepWhenFull = now;
      this.dropExpired(now);
      if (this.fits(specs)) return true;
    }
    if (specs.every((spec) => spec.shadow === true)) return false;
    if (this.dropShadowCountsFor(specs)) return true;
    this.options.onFull?.();
    return false;
  }

  private fits(specs: readonly CounterSpec[]): boolean {
    return this.reservedBytes + this.reservationFor(specs) <= this.maxBytes;
  }

  /** Drops shadow counts, oldest first, until the counters of `specs` fit; whether they do. */
  private dropShadowCountsFor(specs: readonly CounterSpec[]): boolean {
    for (const key of this.shadowKeys) {
      if (this.fits(specs)) return true;
      if (specs.some((spec) => spec.key === key)) continue;
      this.drop(key, this.counters.get(key)!);
      this.options.onShadowDropped?.();
    }
    return this.fits(specs);
  }

  /** Bytes the counters of `specs` not held yet would reserve. */
  private reservationFor(specs: readonly CounterSpec[]): number {
    let bytes = 0;
    for (let i = 0; i < specs.length; i += 1) {
      const { key, windowMs } = specs[i]!;
      if (!isSlotCounter(windowMs) && !this.counters.has(key)) bytes += counterReservation(key);
    }
    return bytes;
  }

  /**
   * The counter a check decides on (`current`): one a shadow check makes is a shadow count, and stops
   * being one once an enforced check uses it (a restriction switched to enforce keeps it for good).
   */
  private checked(spec: CounterSpec, now: number): Counter {
    const counter = this.current(spec.key, spec.windowMs, now, spec.shadow === true);
    if (counter.shadow && spec.shadow !== true) {
      counter.shadow = false;
      this.shadowKeys.delete(spec.key);
    }
    return counter;
  }

  /**
   * The counter with every bucket that has left the window dropped; a new, empty one if there was none
   * (a shadow count when `shadow`).
   */
  private current(key: string, windowMs: number, now: number, shadow = false): Counter {
    const index = Math.floor(now / bucketMsOf(windowMs));
    const oldestKept = index - bucketsPerWindow;
    let counter = this.counters.get(key);
    if (!counter) {
      const reserved = counterReservation(key);
      counter = { total: 0, oldest: index, buckets: [], expiresAt: 0, reserved, shadow };
      this.counters.set(key, counter);
      if (shadow) this.shadowKeys.add(key);
      this.reservedBytes += reserved;
      return counter;
    }
    const { buckets } = counter;
    const leaving = Math.min(buckets.length, oldestKept - counter.oldest);
    if (leaving > 0) {
      for (let i = 0; i < leaving; i += 1) counter.total -= buckets[i]!;
      buckets.splice(0, leaving);
      counter.oldest += leaving;
    }
    // `buckets[0]` is the oldest bucket holding units, so Retry-After and reset are read off it.
    let empty = 0;
    while (empty < buckets.length && buckets[empty] === 0) empty += 1;
    if (empty > 0) {
      buckets.splice(0, empty);
      counter.oldest += empty;
    }
    if (buckets.length === 0) {
      counter.total = 0;
      counter.oldest = index;
    }
    return counter;
  }

  private charge(counter: Counter, windowMs: number, amount: number, now: number): void {
    const bucketMs = bucketMsOf(windowMs);
    const index = Math.floor(now / bucketMs);
    const { buckets } = counter;
    if (buckets.length === 0) counter.oldest = index;
    // A clock that stepped back charges the oldest bucket rather than one before it.
    const position = Math.max(0, index - counter.oldest);
    while (buckets.length <= position) buckets.push(0);
    buckets[position]! += amount;
    counter.total += amount;
    counter.expiresAt = now + windowMs + bucketMs;
    if (counter.total === 0) buckets.length = 0;
  }

  private state(counter: Counter, windowMs: number, now: number): CounterState {
    const bucketMs = bucketMsOf(windowMs);
    const resetMs = counter.total > 0 ? (counter.oldest + bucketsPerWindow + 1) * bucketMs - now : 0;
    return { used: counter.total, resetMs };
  }

  /** Drops counters that have been idle for a whole window, at most once a minute. */
  private sweep(now: number): void {
    if (now - this.lastSweep < sweepEveryMs) return;
    this.lastSweep = now;
    this.dropExpired(now);
  }

  private dropExpired(now: number): void {
    for (const [key, counter] of this.counters) if (counter.expiresAt < now) this.drop(key, counter);
  }

  private drop(key: string, counter: Counter): void {
    this.counters.delete(key);
    if (counter.shadow) this.shadowKeys.delete(key);
    this.reservedBytes -= counter.reserved;
  }
}
