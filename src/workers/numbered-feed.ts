import type { Numbered } from './ipc-peer.js';

/**
 * A set a worker holds as its primary sends it, whole, on start and after every change (the quota
 * definitions, the applications of the API): the primary's repository is the only one that writes
 * them. A set older than the one held is ignored: the answer to a worker's hello and a later change can
 * reach it in either order.
 */
export class NumberedFeed<T, N extends Numbered<T> = Numbered<T>> {
  private records: T[] = [];
  private generation = -1;
  private readonly listeners: Array<(records: T[]) => void> = [];

  all(): T[] {
    return [...this.records];
  }

  onChange(listener: (records: T[]) => void): void {
    this.listeners.push(listener);
  }

  /** Makes the set the current one, unless a later one is held, and tells the listeners. */
  replace(numbered: N): void {
    const { generation, records } = numbered;
    if (generation <= this.generation) return;
    this.generation = generation;
    this.records = records;
    this.adopted(numbered);
    for (const listener of this.listeners) listener(this.all());
  }

  /** Called with a set made the current one, before the listeners hear of it. */
  protected adopted(_numbered: N): void {}

  async close(): Promise<void> {}
}
