import type { StoredQuota } from './model.js';
import type { ResetGenerations } from './quota-index.js';
import type { RefusedQuota } from './quota-repository.js';

/**
 * This process's copy of the quota definitions, which both repositories keep current: reads are served
 * from it, and its listeners hear of every new set.
 */
export abstract class QuotaSnapshot {
  protected records = new Map<string, StoredQuota>();
  protected refusedRecords = new Map<string, RefusedQuota>();
  protected resetGenerations: ResetGenerations = new Map();
  private readonly listeners: Array<(quotas: StoredQuota[]) => void> = [];

  all(): StoredQuota[] {
    return [...this.records.values()];
  }

  get(id: string): StoredQuota | undefined {
    return this.records.get(id);
  }

  ofApplication(application: string): StoredQuota | undefined {
    return this.all().find((record) => record.application === application);
  }

  refused(): RefusedQuota[] {
    return [...this.refusedRecords.values()];
  }

  resets(): ResetGenerations {
    return this.resetGenerations;
  }

  onChange(listener: (quotas: StoredQuota[]) => void): void {
    this.listeners.push(listener);
  }

  /** Makes `records` (and `resets`) the current set and tells the listeners. */
  protected publish(records: Map<string, StoredQuota>, resets = this.resetGenerations): void {
    this.records = records;
    this.resetGenerations = resets;
    const all = this.all();
    for (const listener of this.listeners) listener(all);
  }
}
