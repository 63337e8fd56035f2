/**
 * Time as the limiter sees it: its deadlines, probes and lease lifetimes. Tests pass a clock they move
 * by hand instead of sleeping.
 */
export interface Clock {
  /** Milliseconds. */
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

/** The process's own clock; its timers never keep the process alive. */
export const systemClock: Clock = {
  now: Date.now,
  setTimeout(callback, ms) {
    return setTimeout(callback, ms).unref();
  },
  clearTimeout(timer) {
    clearTimeout(timer as NodeJS.Timeout);
  },
};
