import type { Timers } from '../../src/quota/reload-loop.js';

/** Timers that fire only when a test moves time on: retries are driven without sleeping. */
export class FakeTimers implements Timers {
  /** The delay of every timer set so far, in order. */
  readonly delays: number[] = [];
  private now = 0;
  private nextHandle = 1;
  private readonly pending = new Map<number, { at: number; callback: () => void }>();

  setTimeout(callback: () => void, ms: number): unknown {
    const handle = this.nextHandle;
    this.nextHandle += 1;
    this.pending.set(handle, { at: this.now + ms, callback });
    this.delays.push(ms);
    return handle;
  }

  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }

  /** Milliseconds until each pending timer fires. */
  waiting(): number[] {
    return [...this.pending.values()].map((timer) => timer.at - this.now);
  }

  /** Moves time on by `ms`, firing every timer that falls due. */
  advance(ms: number): void {
    this.now += ms;
    for (const [handle, timer] of [...this.pending]) {
      if (timer.at > this.now) continue;
      this.pending.delete(handle);
      timer.callback();
    }
  }
}
