import type { StoredApplication } from './application-schema.js';

/**
 * The applications a process holds, and the listeners told of every change: what both stores share.
 */
export abstract class ApplicationSet {
  protected applications = new Map<string, StoredApplication>();
  private readonly listeners: Array<(applications: StoredApplication[]) => void> = [];

  all(): StoredApplication[] {
    return [...this.applications.values()];
  }

  get(id: string): StoredApplication | undefined {
    return this.applications.get(id.toLowerCase());
  }

  onChange(listener: (applications: StoredApplication[]) => void): void {
    this.listeners.push(listener);
  }

  /** Makes `next` the set held, and tells the listeners. */
  protected publish(next: Map<string, StoredApplication>): void {
    this.applications = next;
    const all = this.all();
    for (const listener of this.listeners) listener(all);
  }
}
