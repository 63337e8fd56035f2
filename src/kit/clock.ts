import { performance } from 'node:perf_hooks';

/**
 * Time as the request path sees it: its deadlines, probes, lease lifetimes and durations. It enters the
 * process once (runtime/), and tests pass a clock they move by hand instead of sleeping.
 */
export interface Clock {
  /** Milliseconds since the epoch: what windows, expiries and leases are measured against. */
  now(): number;
  /**
   * Milliseconds from an arbitrary origin, monotonic and below the millisecond: what a duration (the
   * added latency, the time to the upstream's head) is measured with, since the wall clock may step.
   */
  monotonic(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

/** The process's own clock; its timers never keep the process alive. */
export const systemClock: Clock = {
  now: Date.now,
  monotonic: () => performance.now(),
  setTimeout(callback, ms) {
    return setTimeout(callback, ms).unref();
  },
  clearTimeout(timer) {
    clearTimeout(timer as NodeJS.Timeout);
  },
};

/**
 * A clock's reading as a `Date`, for a library that takes one (jose's `currentDate`): the time is the
 * clock's, never the process's own.
 */
export const dateAt = (reading: number): Date => new Date(reading);
