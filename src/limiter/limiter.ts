import type { Config } from '../config/schema.js';
import { beforeDeadline, deadlinePassed } from '../deadline.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { CounterAddition, CounterSpec, CounterStore, Decision } from './counter-store.js';

export type OnError = Config['store']['onError'];

/** What to do with a request: a decision of the counters, or "the store is down and policy is deny". */
export type LimiterVerdict = Decision | 'unavailable';

export interface LimiterParts {
  /** The fleet's store (Redis), or null when this gateway's memory store is the store. */
  shared: CounterStore | null;
  /** This gateway's own counters: the store itself, or the fallback of `onError: local`. */
  local: CounterStore;
  onError: OnError;
  /** Answers whether the shared store is reachable again; asked while it is not. */
  probe: () => Promise<boolean>;
  /** Milliseconds a call to the shared store may take before the policy decides instead. */
  timeoutMs: number;
  /** Milliseconds between probes while the shared store is unreachable. */
  probeEveryMs?: number;
  logger: Logger;
  metrics: Metrics;
}

const admitted: Decision = { allowed: true, retryAfterMs: 0, states: [] };

class DecisionTimeout extends Error {}

/**
 * Puts the counter stores behind the declared failure policy (store.onError). While the shared store
 * answers, it decides. A call that fails or misses its deadline is decided by the policy: `local` (this
 * gateway's own memory counters), `allow`, or `deny`. A failed call (connection down) switches the
 * gateway to the policy at once; a late one only when a PING confirms that the store is unreachable, so
 * that a busy moment does not hand the limits to every gateway's own counters. Each switch is logged
 * once; a background probe switches back as soon as the store answers again. A request never waits for
 * a store that is down.
 */
export class Limiter {
  private sharedUp: boolean;
  private probeTimer: NodeJS.Timeout | null = null;
  private confirming = false;

  constructor(private readonly parts: LimiterParts) {
    this.sharedUp = parts.shared !== null;
    parts.metrics.counterStoreShared.set(this.sharedUp ? 1 : 0);
  }

  /** Decides at once when this gateway's counters decide; a promise only while the shared store does. */
  consume(specs: readonly CounterSpec[]): LimiterVerdict | Promise<LimiterVerdict> {
    const { shared } = this.parts;
    return shared && this.sharedUp ? this.consumeShared(shared, specs) : this.consumeWithoutShared(specs);
  }

  async add(additions: readonly CounterAddition[]): Promise<void> {
    const { shared } = this.parts;
    if (shared && this.sharedUp) {
      try {
        await this.withinTimeout(shared.add(additions));
        return;
      } catch (error) {
        this.onSharedFailure(error as Error);
      }
    }
    if (!shared || this.parts.onError === 'local') await this.parts.local.add(additions);
  }

  /** Units counted now by counters under `keyPrefix`, from the store that currently decides. */
  usage(keyPrefix: string, windowMs: number): Promise<Array<{ key: string; used: number }>> {
    const store = this.parts.shared && this.sharedUp ? this.parts.shared : this.parts.local;
    return store.usage(keyPrefix, windowMs);
  }

  close(): void {
    if (this.probeTimer) clearInterval(this.probeTimer);
    this.probeTimer = null;
  }

  private async consumeShared(shared: CounterStore, specs: readonly CounterSpec[]): Promise<LimiterVerdict> {
    try {
      return await this.withinTimeout(Promise.resolve(shared.consume(specs)));
    } catch (error) {
      this.onSharedFailure(error as Error);
      return this.consumeWithoutShared(specs);
    }
  }

  /** The decision of the memory store, or of store.onError while the shared store is unreachable. */
  private consumeWithoutShared(specs: readonly CounterSpec[]): LimiterVerdict | Promise<LimiterVerdict> {
    if (!this.parts.shared) return this.parts.local.consume(specs);
    switch (this.parts.onError) {
      case 'local':
        return this.parts.local.consume(specs);
      case 'allow':
        return admitted;
      case 'deny':
        return 'unavailable';
    }
  }

  private async withinTimeout<T>(work: Promise<T>): Promise<T> {
    const result = await beforeDeadline(work, this.parts.timeoutMs);
    if (result === deadlinePassed) throw new DecisionTimeout(`no answer within ${this.parts.timeoutMs} ms`);
    return result;
  }

  private onSharedFailure(error: Error): void {
    if (!(error instanceof DecisionTimeout)) {
      this.switchToFallback(error);
      return;
    }
    if (this.confirming) return;
    this.confirming = true;
    // A PING gets more time than a decision: it has to tell "down" from "busy".
    const confirmMs = Math.max(200, this.parts.timeoutMs * 4);
    void beforeDeadline(this.parts.probe(), confirmMs)
      .then((answered) => {
        if (answered !== true) this.switchToFallback(error);
        else
          this.parts.logger.warn(
            { timeoutMs: this.parts.timeoutMs },
            'a counter decision missed its deadline; redis still answers',
          );
      })
      .finally(() => {
        this.confirming = false;
      });
  }

  private switchToFallback(error: Error): void {
    if (!this.sharedUp) return;
    this.sharedUp = false;
    this.parts.metrics.counterStoreShared.set(0);
    this.parts.metrics.counterStoreSwitches.inc({ to: this.parts.onError });
    this.parts.logger.error(
      { err: { message: error.message }, onError: this.parts.onError },
      `shared counter store unreachable: store.onError is '${this.parts.onError}' until it answers again`,
    );
    this.probeTimer = setInterval(() => void this.probe(), this.parts.probeEveryMs ?? 250);
    this.probeTimer.unref();
  }

  private async probe(): Promise<void> {
    if (this.sharedUp || !(await this.parts.probe())) return;
    if (this.probeTimer) clearInterval(this.probeTimer);
    this.probeTimer = null;
    this.sharedUp = true;
    this.parts.metrics.counterStoreShared.set(1);
    this.parts.metrics.counterStoreSwitches.inc({ to: 'shared' });
    this.parts.logger.warn('shared counter store answers again: the fleet-wide counters decide again');
  }
}
