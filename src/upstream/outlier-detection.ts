import { upstreamTargets, type ApiConfig } from '../config/schema.js';
import type { Clock } from '../kit/clock.js';
import type { Logger } from '../observe/log.js';
import { isInvalidAnswer } from './outcomes.js';
import { noAddresses, resolvedTargets, type AddressesOf } from './target-addresses.js';
import type { PoolTarget, TargetPool, TargetStanding } from './target-pool.js';

/**
 * Failures of an exchange that are its target's: it could not be reached, cut the exchange, took too
 * long, or broke HTTP. Not those the gateway makes itself (a byte restriction met, a client gone).
 */
const targetFailureCodes: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** Whether the exchange failed for `error` through its target's fault. */
export const isTargetFailure = (error: Error): boolean =>
  targetFailureCodes.has((error as NodeJS.ErrnoException).code ?? '') || isInvalidAnswer(error);

/**
 * Passive outlier detection (Envoy's `consecutive_5xx`): a target whose exchanges fail
 * `consecutiveFailures` times in a row is ejected for `ejectTime` ms on the injected timers, so that
 * it is sent nothing while its pool has a target in, and a success ends the run of failures. At most
 * half of a pool's targets are ejected at once (Envoy's `max_ejection_percent`), so that a fault of the
 * gateway's own, or a surge, does not empty a pool.
 *
 * A target's standing is kept by its API's id and its origin, as its health is, so that a reload that
 * keeps the target keeps what was found of it.
 */
export class OutlierDetection {
  private readonly standings = new Map<string, TargetStanding>();

  constructor(
    private readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
    private readonly logger: Logger,
  ) {}

  /** The standing of `origin` as a target of API `apiId`, shared by the pools of later reloads. */
  standingOf(apiId: string, origin: string): TargetStanding {
    const key = keyOf(apiId, origin);
    const known = this.standings.get(key);
    if (known) return known;
    const standing: TargetStanding = { failures: 0, ejected: false, ejection: null, ejections: 0 };
    this.standings.set(key, standing);
    return standing;
  }

  /**
   * Forgets the targets that `apis` (the config's, at each reload) no longer have, or the addresses their
   * names no longer resolve to (`addressesOf`), ending their ejections.
   */
  watch(apis: readonly ApiConfig[], addressesOf: AddressesOf = noAddresses): void {
    const kept = new Set<string>();
    for (const api of apis)
      for (const { origin } of resolvedTargets(upstreamTargets(api.upstream), addressesOf))
        kept.add(keyOf(api.id, origin));
    for (const [key, standing] of this.standings)
      if (!kept.has(key)) {
        this.timers.clearTimeout(standing.ejection);
        this.standings.delete(key);
      }
  }

  /** An exchange of `target` (of `pool`, of API `apiId`) failed: ejects it at its pool's `consecutiveFailures`. */
  failed<O>(apiId: string, pool: TargetPool<O>, target: PoolTarget<O>): void {
    const rule = pool.outlierDetection;
    if (rule === null) return;
    const { standing } = target;
    standing.failures += 1;
    if (standing.ejected || standing.failures < rule.consecutiveFailures) return;
    let ejected = 0;
    for (const { standing: other } of pool.targets) if (other.ejected) ejected += 1;
    if (ejected + 1 > pool.targets.length / 2) return;
    standing.ejected = true;
    standing.ejections += 1;
    standing.ejection = this.timers.setTimeout(() => {
      standing.ejected = false;
      standing.ejection = null;
      standing.failures = 0;
      this.logger.info({ api: apiId, target: target.name }, 'upstream target back: its ejection ended');
    }, rule.ejectTime);
    this.logger.warn(
      { api: apiId, target: target.name, failures: standing.failures, ejectTime: rule.ejectTime },
      'upstream target ejected: its exchanges failed in a row',
    );
  }

  /** An exchange of `target` was answered below 500: its run of failures ends. */
  succeeded<O>(target: PoolTarget<O>): void {
    target.standing.failures = 0;
  }

  /** Ends every ejection; call as the gateway closes. */
  close(): void {
    for (const standing of this.standings.values()) this.timers.clearTimeout(standing.ejection);
    this.standings.clear();
  }
}

const keyOf = (apiId: string, origin: string) => `${apiId} ${origin}`;
