/**
 * When the fleet's counters are declared away, and when back: the thresholds of the hysteresis. A store
 * that misses one answer (a busy process, a late PING) must not flip the counting mode of the fleet.
 */
export interface OutageThresholds {
  /** Failures in a row, with no answer between them, that confirm an outage (with `spanMs`). */
  failures: number;
  /** Milliseconds from the first failure of a run to the one that confirms the outage: at least this. */
  spanMs: number;
  /** Milliseconds the store must keep answering, from its first answer after an outage, to decide again. */
  stableMs: number;
}

/**
 * Three failures over at least a second confirm an outage; a second of answers ends it. With a probe
 * every 250 ms, a dead Redis is declared away 1 s after its first failure, a frozen one (each PING
 * waits 200 ms) about 1.35 s after, and either decides again 1 s after it first answers.
 */
export const defaultOutageThresholds: Readonly<OutageThresholds> = Object.freeze({
  failures: 3,
  spanMs: 1_000,
  stableMs: 1_000,
});

/**
 * Where the shared store stands: `answering`; `suspected` after a failure (it still decides, and what it
 * cannot decide goes to the policy one request at a time); `away` once the outage is confirmed (the
 * policy decides); `returning` while it answers again, until it has for `stableMs`.
 */
export type StoreStanding = 'answering' | 'suspected' | 'away' | 'returning';

/** A change the limiter acts on: a run of failures began, or ended; an outage confirmed, or over. */
export type StandingChange = 'suspected' | 'cleared' | 'confirmed' | 'over';

/**
 * The hysteresis between the shared store's answers and failures and the fleet's counting mode: a state
 * machine on an injected clock, told each answer and each failure (of a decision, a read, a PING).
 */
export class OutageDetector {
  private current: StoreStanding = 'answering';
  /** The first failure of the current run, or the first answer after an outage. */
  private since = 0;
  private failuresInRow = 0;

  constructor(
    private readonly now: () => number,
    private readonly thresholds: Readonly<OutageThresholds> = defaultOutageThresholds,
  ) {}

  get standing(): StoreStanding {
    return this.current;
  }

  /** A call failed, or a PING went unanswered: the change it makes, if any. */
  failed(): StandingChange | null {
    const now = this.now();
    switch (this.current) {
      case 'answering':
        this.current = 'suspected';
        this.since = now;
        this.failuresInRow = 1;
        return this.confirmed(now) ? 'confirmed' : 'suspected';
      case 'suspected':
        this.failuresInRow += 1;
        return this.confirmed(now) ? 'confirmed' : null;
      case 'returning':
        // Not stable yet: the outage goes on, and a later answer starts the wait again.
        this.current = 'away';
        return null;
      case 'away':
        return null;
    }
  }

  /** The store answered a call or a PING: the change it makes, if any. */
  answered(): StandingChange | null {
    // Most answers come while the store answers: no clock read for them.
    if (this.current === 'answering') return null;
    const now = this.now();
    switch (this.current) {
      case 'suspected':
        this.current = 'answering';
        return 'cleared';
      case 'away':
        this.current = 'returning';
        this.since = now;
        return this.stable(now) ? 'over' : null;
      case 'returning':
        return this.stable(now) ? 'over' : null;
    }
  }

  /**
   * The outage is over for the limiter (it has handed back what it counted alone): the store decides
   * again. Until then an `over` store stays `returning`.
   */
  decidesAgain(): void {
    this.current = 'answering';
  }

  /** The store answered, but what was counted alone could not be handed back: the outage goes on. */
  stillAway(): void {
    this.current = 'away';
  }

  private confirmed(now: number): boolean {
    if (this.failuresInRow < this.thresholds.failures || now - this.since < this.thresholds.spanMs)
      return false;
    this.current = 'away';
    return true;
  }

  private stable(now: number): boolean {
    return now - this.since >= this.thresholds.stableMs;
  }
}
