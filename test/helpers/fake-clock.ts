import type { Clock } from '../../src/kit/clock.js';

/**
 * A clock that moves only when the test says so: `advance` runs every timer that falls due on the way,
 * in order, letting the promises each one starts settle before the next.
 */
export class FakeClock implements Clock {
  private timers: Array<{ at: number; callback: () => void; id: number }> = [];
  private nextId = 1;

  constructor(public time = 1_800_000_000_000) {}

  now = (): number => this.time;

  /** Moves with `now`, from the same origin: a fake clock's durations are the time it was moved. */
  monotonic = (): number => this.time;

  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.nextId;
    this.nextId += 1;
    this.timers.push({ at: this.time + Math.max(0, ms), callback, id });
    return id;
  }

  clearTimeout(timer: unknown): void {
    this.timers = this.timers.filter(({ id }) => id !== timer);
  }

  /** Timers waiting to fire. */
  get pending(): number {
    return this.timers.length;
  }

  async advance(ms: number): Promise<void> {
    const target = this.time + ms;
    for (;;) {
      await settle();
      const due = this.timers.filter(({ at }) => at <= target).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.timers = this.timers.filter((timer) => timer !== due);
      this.time = due.at;
      due.callback();
    }
    this.time = target;
    await settle();
  }
}

/** Lets pending promise callbacks and immediates run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i += 1) await new Promise((resolve) => setImmediate(resolve));
}
