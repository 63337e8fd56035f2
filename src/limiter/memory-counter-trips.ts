import type { CounterTrips, Trip, TripReply } from './counter-trips.js';
import type { MemoryCounterStore } from './memory-counter-store.js';
import type { CounterRef, CounterState, CounterUsage } from './counter-store.js';

/**
 * The counters of the primary process of `workers: N` (`store.type: "memory"`), as its workers reach
 * them: the lease protocol of the Redis store, decided by `MemoryCounterStore.trip` on the primary's
 * clock, one trip at a time (the primary's event loop is the script's atomicity).
 */
export class MemoryCounterTrips implements CounterTrips {
  constructor(private readonly store: MemoryCounterStore) {}

  trip(trip: Trip): Promise<TripReply> {
    return Promise.resolve(this.store.trip(trip));
  }

  usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]> {
    return this.store.usage(keyPrefix, windowMs);
  }

  peek(counters: readonly CounterRef[]): Promise<CounterState[]> {
    return this.store.peek(counters);
  }

  /** Frees every concurrency slot `holder` holds (a worker that exited). */
  releaseAll(holder: string): void {
    this.store.releaseAll(holder);
  }
}
