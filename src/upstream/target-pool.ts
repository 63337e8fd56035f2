import type { BalancePolicy } from '../config/schema.js';
import type { TargetHealth } from './health-checks.js';

/** One target of an API's pool: its origin (its connections: origins.ts's `Origin`), its share, and its health. */
export interface PoolTarget<O = unknown> {
  readonly origin: O;
  /** Its origin URL (`http://10.0.0.1:9000`), as the access line and the log name it. */
  readonly name: string;
  readonly weight: number;
  /** What the health checks of this gateway found, shared with the pools of later reloads. */
  readonly health: TargetHealth;
  /** Smooth weighted round-robin's running score (nginx's `current_weight`). */
  score: number;
}

/**
 * Spreads an API's exchanges across its targets by their weights, among the healthy ones; when none is
 * healthy, among all of them (a gateway that refused everything would be down for sure, one that tries
 * may still reach a target its checks have not yet seen come back).
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
  constructor(
    readonly targets: ReadonlyArray<PoolTarget<O>>,
    private readonly balance: BalancePolicy,
    /** Exchanges in flight to a target's origin (its pool's running, pending and queued requests). */
    private readonly inFlight: (origin: O) => number,
  ) {}

  /** The target the next exchange goes to. */
  pick(): PoolTarget<O> {
    const onlyHealthy = this.targets.some(({ health }) => health.healthy);
    if (this.balance === 'round-robin') return this.roundRobin(onlyHealthy, null);
    let fewest = Infinity;
    for (const target of this.targets) {
      if (onlyHealthy && !target.health.healthy) continue;
      fewest = Math.min(fewest, this.load(target));
    }
    return this.roundRobin(onlyHealthy, fewest);
  }

  private load(target: PoolTarget<O>): number {
    return this.inFlight(target.origin) / target.weight;
  }

  /** Smooth weighted round-robin among the usable targets (of `load` equal to `load` when not null). */
  private roundRobin(onlyHealthy: boolean, load: number | null): PoolTarget<O> {
    let total = 0;
    let best: PoolTarget<O> | null = null;
    for (const target of this.targets) {
      if (onlyHealthy && !target.health.healthy) continue;
      if (load !== null && this.load(target) !== load) continue;
      target.score += target.weight;
      total += target.weight;
      if (best === null || target.score > best.score) best = target;
    }
    // The config holds at least one target, and some target is usable whenever any is.
    best!.score -= total;
    return best!;
  }
}
