import type { StoredQuota } from './model.js';
import type { RefusedQuota } from './quota-repository.js';

/**
 * This process's copy of the quota definitions, which both repositories keep current: reads are served
 * from it, and its listeners hear of every new set.
 */
export abstract class QuotaSnapshot {
  protected records = new Map<string, StoredQuota>();
  protected refusedRecords = new Map<string, RefusedQuota>();
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

  onChange(listener: (quotas: StoredQuota[]) => void): void {
    this.listeners.push(listener);
  }

  /** Makes `records` the current set and tells the listeners. */
  protected publish(records: Map<string, StoredQuota>): void {
    this.records = records;
    const all = this.all();
    for (const listener of this.listeners) listener(all);
  }
}
