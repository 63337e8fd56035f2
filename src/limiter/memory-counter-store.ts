import {
  bucketMsOf,
  bucketsPerWindow,
  type CounterAddition,
  type CounterSpec,
  type CounterState,
  type CounterStore,
  type Decision,
} from './counter-store.js';

interface Counter {
  total: number;
  /** Every bucket below this index is empty. */
  oldest: number;
  buckets: Map<number, number>;
  /** Idle counters are dropped after this time. */
  expiresAt: number;
}

const sweepEveryMs = 60_000;

/**
 * `store.type: "memory"`: the counters of one gateway process, with the same sliding-window semantics as
 * the Redis store. Time comes from `now` (milliseconds), so tests move it instead of sleeping.
 */
export class MemoryCounterStore implements CounterStore {
  private readonly counters = new Map<string, Counter>();
  private lastSweep: number;

  constructor(private readonly now: () => number = Date.now) {
    this.lastSweep = now();
  }

  consume(specs: readonly CounterSpec[]): Decision {
    const now = this.now();
    this.sweep(now);
    const counters = specs.map((spec) => this.current(spec.key, spec.windowMs, now));
    const full = specs.filter((spec, i) => counters[i]!.total + spec.need > spec.limit);
    if (full.length > 0) {
      const retryAfterMs = Math.max(
        ...specs.map((spec, i) =>
          counters[i]!.total + spec.need > spec.limit ? this.retryAfter(counters[i]!, spec, now) : 0,
        ),
      );
      return {
        allowed: false,
        retryAfterMs,
        states: specs.map((spec, i) => this.state(counters[i]!, spec.windowMs, now)),
      };
    }
    specs.forEach((spec, i) => this.charge(counters[i]!, spec.windowMs, spec.cost, now));
    return {
      allowed: true,
      retryAfterMs: 0,
      states: specs.map((spec, i) => this.state(counters[i]!, spec.windowMs, now)),
    };
  }

  async add(additions: readonly CounterAddition[]): Promise<void> {
    const now = this.now();
    for (const { key, windowMs, amount } of additions) {
      if (amount > 0) this.charge(this.current(key, windowMs, now), windowMs, amount, now);
    }
  }

  async usage(keyPrefix: string, windowMs: number): Promise<Array<{ key: string; used: number }>> {
    const now = this.now();
    return [...this.counters.keys()]
      .filter((key) => key.startsWith(keyPrefix))
      .map((key) => ({ key, used: this.current(key, windowMs, now).total }))
      .filter(({ used }) => used > 0);
  }

  async close(): Promise<void> {
    this.counters.clear();
  }

  /** The counter with every bucket that has left the window dropped. */
  private current(key: string, windowMs: number, now: number): Counter {
    const bucketMs = bucketMsOf(windowMs);
    const index = Math.floor(now / bucketMs);
    const oldestKept = index - bucketsPerWindow;
    let counter = this.counters.get(key);
    if (!counter || oldestKept - counter.oldest > bucketsPerWindow + 1) {
      counter = { total: 0, oldest: oldestKept, buckets: new Map(), expiresAt: 0 };
      this.counters.set(key, counter);
    }
    for (; counter.oldest < oldestKept; counter.oldest += 1) {
      counter.total -= counter.buckets.get(counter.oldest) ?? 0;
      counter.buckets.delete(counter.oldest);
    }
    // Advance past empty buckets so that `oldest` is the first one holding units.
    while (counter.total > 0 && counter.oldest < index && !counter.buckets.has(counter.oldest))
      counter.oldest += 1;
    return counter;
  }

  private charge(counter: Counter, windowMs: number, amount: number, now: number): void {
    const bucketMs = bucketMsOf(windowMs);
    const index = Math.floor(now / bucketMs);
    // An empty counter's first units are its oldest.
    if (counter.total === 0) counter.oldest = index;
    counter.buckets.set(index, (counter.buckets.get(index) ?? 0) + amount);
    counter.total += amount;
    counter.expiresAt = now + windowMs + bucketMs;
  }

  private state(counter: Counter, windowMs: number, now: number): CounterState {
    const bucketMs = bucketMsOf(windowMs);
    const resetMs = counter.total > 0 ? (counter.oldest + bucketsPerWindow + 1) * bucketMs - now : 0;
    return { used: counter.total, resetMs };
  }

  /** Milliseconds until enough of the oldest buckets leave the window for `spec.need` to fit. */
  private retryAfter(counter: Counter, spec: CounterSpec, now: number): number {
    const bucketMs = bucketMsOf(spec.windowMs);
    if (spec.need > spec.limit) return spec.windowMs + bucketMs;
    let excess = counter.total + spec.need - spec.limit;
    const index = Math.floor(now / bucketMs);
    for (let bucket = counter.oldest; bucket <= index; bucket += 1) {
      excess -= counter.buckets.get(bucket) ?? 0;
      if (excess <= 0) return (bucket + bucketsPerWindow + 1) * bucketMs - now;
    }
    return spec.windowMs + bucketMs;
  }

  /** Drops counters that have been idle for a whole window, at most once a minute. */
  private sweep(now: number): void {
    if (now - this.lastSweep < sweepEveryMs) return;
    this.lastSweep = now;
    for (const [key, counter] of this.counters) {
      if (counter.expiresAt < now) this.counters.delete(key);
    }
  }
}
