import type { ApplicationSource } from '../applications/application-directory.js';
import type { QuotaRepository } from '../quota/quota-repository.js';
import type { IpcPeer } from '../workers/ipc-peer.js';

/** The quota definitions as a worker has them: read-only, following every change. */
export type QuotaDefinitions = Pick<QuotaRepository, 'all' | 'resets' | 'onChange' | 'close'>;

/**
 * What a data plane run apart from its primary (a worker process of `workers: N`, or the data-plane
 * thread of `workers: 1`) takes from it instead of owning it: the quota definitions (the primary alone
 * writes them), the admin listener and, with the memory store and `workers: N`, the counters, over the
 * channel `primary`. With Redis, every worker reaches the counters itself, as a gateway of the fleet.
 */
export interface PrimaryFeeds {
  definitions: QuotaDefinitions;
  /** The applications made through the portal API, as the primary sends them. */
  applications: ApplicationSource;
  /** The primary's admin listener, which serves this worker's gateway too. */
  adminPort: number;
  /** The channel to the primary: a worker process's IPC, or the data-plane thread's parent port. */
  primary: IpcPeer;
  /** The primary holds the counters (the memory store, `workers: N`): they are reached through `primary`. */
  primaryCounters: boolean;
  /** The data planes sharing the primary's counters: a lease never takes more than this one's part. */
  workers: number;
}

/**
 * What a process is, which decides what it builds (src/runtime/):
 * - `single`: one gateway in one thread, the data plane and its admin listener side by side
 *   (`startGateway`: tests, embedding);
 * - `primary`: `gateway start`'s process: the stores, the admin listener and the data planes it runs
 *   (`workers` of them: processes, or one thread);
 * - `worker`: a data plane fed by its primary (a worker process, or the data-plane thread);
 * - `command`: an offline command that reads or writes the stores, and serves nothing.
 */
export type Role =
  | { kind: 'single' }
  | { kind: 'primary'; workers: number }
  | { kind: 'worker'; feeds: PrimaryFeeds }
  | { kind: 'command' };
