/** An exchange whose answer is read to its end after its client left, as `AnswerDrains` holds it. */
export interface DrainedExchange {
  /** Stops reading: the upstream exchange is aborted, and what the answer said so far is what it says. */
  cutReading(): void;
}

/**
 * The answers a gateway reads to their end after their clients left (`Exchange.readRestOfAnswer`), in
 * the order their clients left. Each holds an upstream connection until its answer ends, so they are
 * bounded: past `limit` the oldest is cut, whatever the clients that left do (only token admission
 * bounded them before, and a client that leaves at once makes room for its next call).
 */
export class AnswerDrains<Exchange extends DrainedExchange = DrainedExchange> {
  private readonly reading = new Set<Exchange>();

  /**
   * @param limit answers read at once (`upstreamDrainLimit`), at least 1; a reload changes it, and the
   *   reads over a lowered limit are cut as the next one starts
   * @param onCut told of each read cut to make room (the metric)
   */
  constructor(
    public limit: number,
    private readonly onCut: () => void = () => undefined,
  ) {}

  /** Answers read now. */
  get size(): number {
    return this.reading.size;
  }

  /** Reads `exchange`'s answer from now on: the oldest reads past the limit are cut, first to last. */
  add(exchange: Exchange): void {
    this.reading.add(exchange);
    for (const oldest of this.reading) {
      if (this.reading.size <= this.limit) return;
      this.reading.delete(oldest);
      this.onCut();
      oldest.cutReading();
    }
  }

  /** `exchange`'s answer is no longer read: it ended, failed, or was given up. */
  delete(exchange: Exchange): void {
    this.reading.delete(exchange);
  }
}
