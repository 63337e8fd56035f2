import { systemClock, type Clock } from '../kit/clock.js';
import { SerialRuns } from '../kit/serial-runs.js';
/** The timers of the retries: the limiter's clock without its reading. */
export type Timers = Pick<Clock, 'setTimeout' | 'clearTimeout'>;

/** Milliseconds before the first retry of a failed run; each further failure doubles it, up to the cap. */
export const firstRetryMs = 100;
export const longestRetryMs = 2_000;

export interface ReloadLoopOptions {
  timers?: Timers;
  /** After each failed run: `failures` in a row so far, and when the next try comes. */
  onFailure(error: Error, failures: number, retryInMs: number): void;
  /** After a run succeeded that follows `failures` failed ones. */
  onRecovery(failures: number): void;
}

/**
 * Runs `task` (a reload) on demand, one run at a time: requests made while a run waits to start share it,
 * so a burst of change messages costs one reload more, not one each. A failed run is tried again after a
 * backoff (100 ms, doubling up to 2 s) until one succeeds or the loop is closed; a request made during
 * the wait runs at once.
 */
export class ReloadLoop {
  private readonly timers: Timers;
  private readonly runs = new SerialRuns(() => this.attempt());
  private retry: unknown = null;
  private failures = 0;
  private closed = false;

  constructor(
    private readonly task: () => Promise<void>,
    private readonly options: ReloadLoopOptions,
  ) {
    this.timers = options.timers ?? systemClock;
  }

  /** Asks for a run without waiting for it; a failure is reported through `onFailure` and retried. */
  request(): void {
    this.run().catch(() => undefined);
  }

  /**
   * A run that starts after the one in progress: resolves when it succeeds, rejects with its error (a
   * retry is then scheduled). Does nothing once the loop is closed.
   */
  run(): Promise<void> {
    return this.runs.run();
  }

  /** Stops retrying and waits for the run in progress. */
  async close(): Promise<void> {
    this.closed = true;
    this.cancelRetry();
    await this.runs.drained();
  }

  private async attempt(): Promise<void> {
    if (this.closed) return;
    this.cancelRetry();
    try {
      await this.task();
    } catch (error) {
      this.failures += 1;
      const delay = Math.min(longestRetryMs, firstRetryMs * 2 ** (this.failures - 1));
      this.options.onFailure(error as Error, this.failures, delay);
      if (!this.closed) {
        this.retry = this.timers.setTimeout(() => {
          this.retry = null;
          this.request();
        }, delay);
      }
      throw error;
    }
    if (this.failures > 0) this.options.onRecovery(this.failures);
    this.failures = 0;
  }

  private cancelRetry(): void {
    if (this.retry === null) return;
    this.timers.clearTimeout(this.retry);
    this.retry = null;
  }
}
