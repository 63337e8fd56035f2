/**
 * Runs one task, one run at a time: asking while a run waits to start joins that run (it will see the
 * world as it is when it starts), asking while one is in progress queues one more. A burst of requests
 * costs one run more, not one each.
 */
export class SerialRuns<T> {
  private settled: Promise<unknown> = Promise.resolve();
  private waiting: Promise<T> | null = null;

  constructor(private readonly task: () => Promise<T>) {}

  run(): Promise<T> {
    if (this.waiting) return this.waiting;
    const run = this.settled.then(() => {
      this.waiting = null;
      return this.task();
    });
    this.waiting = run;
    this.settled = run.catch(() => undefined);
    return run;
  }

  /** Resolves once every run asked for so far has ended, however it ended. */
  async drained(): Promise<void> {
    await this.settled;
  }
}
