import type { IpcPeer } from './ipc-peer.js';
import type { CounterRef, CounterState, CounterUsage } from '../limiter/counter-store.js';
import type { CounterTrips, Trip, TripReply } from '../limiter/counter-trips.js';
import type { MemoryCounterTrips } from '../limiter/memory-counter-trips.js';

/**
 * The counters the primary process holds (`workers: N`, `store.type: "memory"`), as a worker reaches
 * them: one IPC request per trip. A worker drives them with `SharedCounterStore`, so its leases keep IPC
 * off the path of most requests, exactly as they keep Redis off it.
 */
export class IpcCounterTrips implements CounterTrips {
  constructor(private readonly primary: IpcPeer) {}

  /** @throws when the channel to the primary has closed (the primary is gone). */
  trip(trip: Trip): Promise<TripReply> {
    return this.primary.request('trip', trip);
  }

  usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]> {
    return this.primary.request('usage', { keyPrefix, windowMs });
  }

  peek(counters: readonly CounterRef[]): Promise<CounterState[]> {
    return this.primary.request('peek', [...counters]);
  }
}

/**
 * Answers the trips of the worker at the other end of `worker` with `trips` (in the primary). The
 * worker holds its concurrency slots as `holder`, each worker its own, and the slots it held are freed
 * when its channel closes: a worker that exits, however it exits, holds no slot.
 */
export function serveCounterTrips(
  worker: IpcPeer,
  trips: Pick<MemoryCounterTrips, keyof CounterTrips | 'releaseAll'>,
  holder: string,
): void {
  worker.answer('trip', (trip) => trips.trip({ ...trip, holder }));
  worker.onClose(() => trips.releaseAll(holder));
  worker.answer('usage', ({ keyPrefix, windowMs }) => trips.usage(keyPrefix, windowMs));
  worker.answer('peek', (counters) => trips.peek(counters));
}
