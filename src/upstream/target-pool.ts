import type { BalancePolicy, OutlierDetectionConfig } from '../config/schema.js';
import type { TargetHealth } from './health-checks.js';
import { RetryBudget } from './retry-budget.js';

/** What this gateway's exchanges found of one target of a pool (passive outlier detection). */
export interface TargetStanding {
  /** Exchanges in a row that failed (a connection refused, reset or timed out, a 5xx answer). */
  failures: number;
  /** Whether it is ejected: it is sent nothing while a target of its pool is in. */
  ejected: boolean;
  /** The timer that ends its ejection; null while it is not ejected. */
  ejection: unknown;
  /** Times it was ejected since the start (its metric reads it). */
  ejections: number;
}

/** One target of an API's pool: its origin (its connections: origins.ts's `Origin`), its share, and its health. */
export interface PoolTarget<O = unknown> {
  readonly origin: O;
  /** Its origin URL (`http://10.0.0.1:9000`), as the access line and the log name it. */
  readonly name: string;
  readonly weight: number;
  /** What the health checks of this gateway found, shared with the pools of later reloads. */
  readonly health: TargetHealth;
  /** What passive outlier detection found of it, shared with the pools of later reloads. */
  readonly standing: TargetStanding;
  /** Smooth weighted round-robin's running score (nginx's `current_weight`). */
  score: number;
  /** What was sent to it, shared with the pools of later reloads that keep it (its metrics read them). */
  readonly counts: TargetCounts;
}

/** Exchanges sent to a target since the start, as its metrics and the admin listener report them. */
export interface TargetCounts {
  /** Exchanges sent to it, retries included. */
  requests: number;
  /** Exchanges to it that failed without an answer (refused, reset, timed out, invalid). */
  failures: number;
  /** Exchanges sent to it after another target failed them. */
  retries: number;
}

/** Counts the failure of the exchange's last target, of the targets it was sent to in order. */
export function countFailure(tried: ReadonlyArray<PoolTarget> | undefined): void {
  const last = tried?.at(-1);
  if (last !== undefined) last.counts.failures += 1;
}

/**
 * Spreads an API's exchanges across its targets by their weights, among those in (healthy, and not
 * ejected by outlier detection); when none is in, among all of them (a gateway that refused everything
 * would be down for sure, one that tries may still reach a target its checks have not yet seen come
 * back).
 *
 * `round-robin` is nginx's smooth weighted round-robin: over any run of as many picks as the weights
 * add up to, each target is picked its weight's number of times, interleaved (3:1 gives a a b a, not
 * a a a b). `least-requests` picks the target with the fewest exchanges in flight for its
 * weight (in flight / weight: under load, a target of weight 2 holds twice the exchanges of one of
 * weight 1), and breaks ties by the same round-robin, so that idle targets share the exchanges by weight.
 *
 * undici's `BalancedPool` is not used: it takes no configured weights (it moves its own between
 * bounds, down on each error), does not say which upstream it sent an exchange to (the Host field and
 * the access line need it, and a WebSocket opening goes through another path), and has no
 * least-requests or health state of its own.
 */
export class TargetPool<O = unknown> {
  /** What retries the API may still send (retry-budget.ts). */
  readonly budget = new RetryBudget();

  /**
   * @param retries other targets an exchange may be sent to after the one before could not take it
   * @param outlierDetection when targets are ejected after failures in a row (outlier-detection.ts)
   */
  constructor(
    readonly targets: ReadonlyArray<PoolTarget<O>>,
    private readonly balance: BalancePolicy,
    /** Exchanges in flight to a target's origin (its pool's running, pending and queued requests). */
    private readonly inFlight: (origin: O) => number,
    readonly retries: number,
    readonly outlierDetection: OutlierDetectionConfig | null = null,
  ) {}

  /** The target the next exchange goes to. */
  pick(): PoolTarget<O> {
    // The config holds at least one target, and nothing is passed over.
    return this.pickOther(noTargets)!;
  }

  /**
   * The target an exchange goes to next, other than those it `tried` (counted as sent to it, and as a
   * retry after the first); null when none is left.
   */
  pickOther(tried: ReadonlyArray<PoolTarget<O>>): PoolTarget<O> | null {
    const picked = this.chosen(tried);
    if (picked !== null) {
      picked.counts.requests += 1;
      if (tried.length > 0) picked.counts.retries += 1;
    }
    return picked;
  }

  private chosen(tried: ReadonlyArray<PoolTarget<O>>): PoolTarget<O> | null {
    const onlyIn = this.targets.some((target) => isIn(target) && !tried.includes(target));
    const usable = (target: PoolTarget<O>) => !tried.includes(target) && (!onlyIn || isIn(target));
    if (this.balance === 'round-robin') return this.roundRobin(usable, null);
    let fewest = Infinity;
    for (const target of this.targets) if (usable(target)) fewest = Math.min(fewest, this.load(target));
    return this.roundRobin(usable, fewest);
  }

  private load(target: PoolTarget<O>): number {
    return this.inFlight(target.origin) / target.weight;
  }

  /** Smooth weighted round-robin among the `usable` targets (of `load` equal to `load` when not null). */
  private roundRobin(usable: (target: PoolTarget<O>) => boolean, load: number | null): PoolTarget<O> | null {
    let total = 0;
    let best: PoolTarget<O> | null = null;
    for (const target of this.targets) {
      if (!usable(target)) continue;
      if (load !== null && this.load(target) !== load) continue;
      target.score += target.weight;
      total += target.weight;
      if (best === null || target.score > best.score) best = target;
    }
    if (best !== null) best.score -= total;
    return best;
  }
}

const noTargets: readonly never[] = [];

/** Whether a target takes exchanges: healthy, and not ejected. */
const isIn = (target: PoolTarget): boolean => target.health.healthy && !target.standing.ejected;
