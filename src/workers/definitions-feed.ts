import type { StoredQuota } from '../quota/model.js';
import type { Definitions } from './ipc-peer.js';
import type { QuotaDefinitions } from './worker-role.js';

/**
 * The quota definitions of a worker: the whole set as the primary sends it, on start and after every
 * change. The primary's repository is the only one that writes them. A set older than the one held
 * is ignored: the answer to a worker's hello and a later change can reach it in either order.
 */
export class DefinitionsFeed implements QuotaDefinitions {
  private records: StoredQuota[] = [];
  private generation = -1;
  private readonly listeners: Array<(quotas: StoredQuota[]) => void> = [];

  all(): StoredQuota[] {
    return [...this.records];
  }

  onChange(listener: (quotas: StoredQuota[]) => void): void {
    this.listeners.push(listener);
  }

  /** Makes the set the current one, unless a later one is held, and tells the listeners. */
  replace({ generation, records }: Definitions): void {
    if (generation <= this.generation) return;
    this.generation = generation;
    this.records = records;
    for (const listener of this.listeners) listener(this.all());
  }

  async close(): Promise<void> {}
}
