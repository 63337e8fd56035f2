/** Milliseconds over which an API's exchanges and retries are weighed against each other. */
const budgetWindowMs = 10_000;
/** Retries allowed beyond the reserve, as a share of the exchanges of the window. */
const retryRatio = 0.2;
/** Retries allowed each second whatever the traffic: the reserve that a burst draws on. */
const reservePerSecond = 10;
const reserve = (reservePerSecond * budgetWindowMs) / 1000;

/**
 * An API's retry budget, as Linkerd's and Finagle's (the same defaults): over the last 10 s, retries stay
 * below 20% of the exchanges sent, plus a reserve of 10 a second. A fleet that fails is thus sent at
 * most 1.2× its load and 10 exchanges a second, while the exchanges a killed target held when it died (their connections reset at
 * once) are all sent on: a budget on the retries open at once (Envoy's, 20% of the exchanges in flight)
 * answered most of a burst's share of the dead target 503, though the API had sent nothing twice for
 * minutes.
 *
 * The window is two buckets of 10 s: the one running, and the one before weighted by how much of it is
 * still within the last 10 s (as a sliding window counter: no list of times is kept per exchange).
 */
export class RetryBudget {
  private bucketStart = Number.NEGATIVE_INFINITY;
  private sent = 0;
  private retried = 0;
  private sentBefore = 0;
  private retriedBefore = 0;

  /** Notes an exchange sent to the API's first target at `now` (monotonic milliseconds). */
  noteExchange(now: number): void {
    this.roll(now);
    this.sent += 1;
  }

  /** Whether one more retry fits the budget at `now`; when it does, it is counted. */
  withdraw(now: number): boolean {
    this.roll(now);
    const past = 1 - (now - this.bucketStart) / budgetWindowMs;
    const sent = this.sent + this.sentBefore * past;
    const retried = this.retried + this.retriedBefore * past;
    if (retried + 1 > reserve + sent * retryRatio) return false;
    this.retried += 1;
    return true;
  }

  private roll(now: number): void {
    const elapsed = now - this.bucketStart;
    if (elapsed < budgetWindowMs) return;
    const adjacent = elapsed < 2 * budgetWindowMs;
    this.sentBefore = adjacent ? this.sent : 0;
    this.retriedBefore = adjacent ? this.retried : 0;
    this.sent = 0;
    this.retried = 0;
    this.bucketStart = adjacent ? this.bucketStart + budgetWindowMs : now;
  }
}
