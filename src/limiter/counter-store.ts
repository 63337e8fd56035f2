import type { CalendarSpec } from '../kit/calendar-window.js';

/**
 * One counter of a sliding window: `limit` units in any interval of `windowMs` milliseconds.
 * Units are messages (throttle) or bytes (throttlemb).
 *
 * A counter of `windowMs` 0 is a concurrency counter (`isSlotCounter`): it holds the requests in flight,
 * at most `limit`, each one a slot taken when its check is admitted and held until the request ends
 * (`Decision.slotsFreedBy`). It never leaves a window and is never leased.
 */
export interface CounterSpec {
  /** Store key of the counter, unique per restriction (and per application for application quotas). */
  key: string;
  limit: number;
  /** The window; 0 for a concurrency counter. */
  windowMs: number;
  /**
   * A calendar window instead of a sliding one: the store counts in the window of its clock's now, from
   * its start to its end (`CalendarCounters`), and `windowMs` is not read.
   */
  calendar?: CalendarSpec;
  /** Units charged when the check passes. */
  cost: number;
  /** Room the counter must have for the check to pass (at least `cost`). */
  need: number;
  /**
   * The check of a shadow restriction, which never refuses: under a memory bound its counter is the
   * first to go, so that it never takes the room of an enforced one (`MemoryCounterStore`).
   */
  shadow?: true;
}

/** The state of one counter after a decision. */
export interface CounterState {
  /** Units counted in the window, including this request's cost when it was admitted. */
  used: number;
  /**
   * Milliseconds until the oldest counted units leave the window (0 when nothing is counted); for a
   * counter that refused the request, until it has room for it: the wait its Retry-After says.
   */
  resetMs: number;
  /**
   * A calendar counter's: the length of the window it counts in, which changes from one to the next (a
   * month's days, a daylight-saving day's 23 or 25 hours); `resetMs` is then the time to its end.
   */
  windowMs?: number;
  /** A calendar counter's: the instant its window ends, the same for every request of the window. */
  windowEnd?: number;
}

/** One counter to read without charging it: its key and window. */
export interface CounterRef {
  key: string;
  windowMs: number;
  calendar?: CalendarSpec;
}

/** What one counter holds now, as the admin API's usage shows it. */
export interface CounterUsage extends CounterState {
  key: string;
}

/** Whether a counter of this window holds requests in flight (a `concurrency` restriction's). */
export const isSlotCounter = (windowMs: number): boolean => windowMs === 0;

/**
 * What a full concurrency counter's refusal waits, and its `resetMs`: a slot is freed when any request
 * ends, which no clock predicts, and 1 s is the shortest wait Retry-After can say (RFC 9110 §10.2.3).
 */
export const slotRetryMs = 1_000;

/** Where the slots of an admitted request were taken: freed there, once each, when the request ends. */
export interface SlotRelease {
  /** Frees one slot of each key (a key given twice frees two); never fails, never waits for an answer. */
  release(keys: readonly string[]): void;
}

export interface Decision {
  allowed: boolean;
  /** When not allowed: milliseconds until every full counter has room again. */
  retryAfterMs: number;
  /** One per counter, in the order given (none when `outOfRoom`). */
  states: CounterState[];
  /**
   * Not allowed because a counter this request needs would pass the store's memory bound
   * (`store.maxCounterMemoryMb`), or for a shadow check because only shadow counts would have had to
   * go; nothing was charged. Only the memory store sets it.
   */
  outOfRoom?: boolean;
  /** When allowed with concurrency counters among the checks: the store that holds their slots. */
  slotsFreedBy?: SlotRelease;
}

/** Units to add without a check: bytes measured once an exchange has ended. */
export interface CounterAddition {
  key: string;
  windowMs: number;
  /** Added to the calendar window of the store's now. */
  calendar?: CalendarSpec;
  amount: number;
}

/**
 * Where sliding-window counters live. Both implementations keep, per counter, a running total and
 * sub-buckets of 1/100 of the window, and admit a request only when every counter has room over the
 * last 101 sub-buckets: so no interval of one window ever holds more than the limit. Concurrency
 * counters are checked in the same atomic step, and their slots are freed through `slotsFreedBy`.
 */
export interface CounterStore {
  /**
   * Checks every counter and, only if all have room, charges all of them: one atomic step, all or
   * nothing. Rejected requests are never counted.
   * The memory store answers at once, without a promise.
   * @throws when the store cannot be reached (the caller applies store.onError).
   */
  consume(counters: readonly CounterSpec[]): Decision | Promise<Decision>;
  /** Adds units to counters without checking them. */
  add(additions: readonly CounterAddition[]): Promise<void> | void;
  /** Units now counted by every counter whose key starts with `keyPrefix` (those holding any). */
  usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]>;
  /** What each of `counters` holds now (0 for one that holds nothing), without charging or creating it. */
  peek(counters: readonly CounterRef[]): Promise<CounterState[]>;
  close(): Promise<void>;
}

/** Sub-buckets per window: the admitted rate of a client held at its limit is at least 100/101 of it. */
export const bucketsPerWindow = 100;

export function bucketMsOf(windowMs: number): number {
  return Math.max(1, Math.ceil(windowMs / bucketsPerWindow));
}
