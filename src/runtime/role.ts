import type { ApplicationSource } from './applications/application-directory.js';
import type { CounterTrips } from './limiter/counter-trips.js';
import type { QuotaRepository } from './quota/quota-repository.js';

/** The quota definitions as a worker has them: read-only, following every change. */
export type QuotaDefinitions = Pick<QuotaRepository, 'all' | 'onChange' | 'close'>;

/** The counters the primary holds for its workers (`store.type: "memory"`). */
export interface PrimaryCounters {
  trips: CounterTrips;
  /** Workers sharing the counters: a lease never takes more than this worker's part of the room. */
  live: () => number;
  /** Whether the primary can still be reached: its channel is open. */
  reachable: () => Promise<boolean>;
  /** Milliseconds a decision of the primary may take before `reachable` is asked. */
  timeoutMs: number;
}

/**
 * What a worker process of `workers: N` takes from its primary instead of owning it: the quota
 * definitions (the primary alone writes them), the admin listener and, with the memory store, the
 * counters. With Redis, every worker reaches the counters itself, as a gateway of the fleet.
 */
export interface WorkerRole {
  definitions: QuotaDefinitions;
  /** The applications made through the portal API, as the primary sends them. */
  applications: ApplicationSource;
  /** The primary's admin listener, which serves this worker's gateway too. */
  adminPort: number;
  counters: PrimaryCounters | null;
}
