import { systemClock, type Clock } from '../kit/clock.js';
import { beforeDeadline, deadlinePassed } from '../kit/deadline.js';
import type { Logger } from '../observe/log.js';
import type { Metrics } from '../observe/metrics.js';
import {
  isSlotCounter,
  type CounterAddition,
  type CounterRef,
  type CounterSpec,
  type CounterState,
  type CounterStore,
  type CounterUsage,
  type Decision,
} from './counter-store.js';
import type { KnownTotal } from './lease-book.js';
import type { MemoryCounterStore } from './memory-counter-store.js';

/** What the gateway does while the shared counters cannot decide (`store.onError`). */
export const onErrorPolicies = ['local', 'allow', 'deny'] as const;
export type OnError = (typeof onErrorPolicies)[number];

/** What to do with a request: a decision of the counters, or "the store is down and policy is deny". */
export type LimiterVerdict = Decision | 'unavailable';

/** The fleet's counters as the limiter drives them through an outage. */
export interface SharedCounters extends CounterStore {
  /** The store is out of reach: end leases, forget what is known full. */
  suspend(): void;
  resume(): void;
  /** Each counter's total as the store last reported it, and the local time it did. */
  lastKnown(): Array<KnownTotal & { key: string }>;
}

export interface LimiterParts {
  /** The fleet's store (Redis), or null when this gateway's memory store is the store. */
  shared: SharedCounters | null;
  /** This gateway's own counters: the store itself, or the fallback of `onError: local`. */
  local: MemoryCounterStore;
  onError: OnError;
  /** Answers whether the shared store is reachable; asked to confirm an outage, and while it lasts. */
  probe: () => Promise<boolean>;
  /** Milliseconds a decision of the shared store may take before an outage is suspected. */
  timeoutMs: number;
  /** Milliseconds between probes while the shared store is unreachable. */
  probeEveryMs?: number;
  /** This gateway's part of a limit while every gateway decides alone (`onError: local`). */
  shareOf?: (limit: number) => number;
  clock?: Clock;
  logger: Logger;
  metrics: Metrics;
}

const admitted: Decision = { allowed: true, retryAfterMs: 0, states: [] };
const outageConfirmed = Symbol('outage confirmed');

/**
 * Puts the counter stores behind the declared failure policy (store.onError). While the shared store
 * answers, it decides, however long it takes: a decision that misses `timeoutMs` waits on while a PING
 * (given four times as long) is asked whether the store is there; only a failed call or a confirmed
 * outage hands the decisions to the policy, so a slow Redis never lets counters that have not seen the
 * fleet's traffic decide. With `local`, each gateway then enforces its share of every limit (the limit
 * ÷ the live gateways), seeded with the totals it last saw, and when the store answers again the units
 * it admitted alone are added to the shared counters. Each switch is logged once. A request never waits
 * for a store that is down: a call on a lost connection fails at once, and every call has the Redis
 * client's command timeout.
 */
export class Limiter {
  private sharedUp: boolean;
  private probeTimer: unknown = null;
  private confirming: Promise<boolean> | null = null;
  /** Units this gateway admitted alone during an outage, to add to the shared counters after it. */
  private readonly admittedAlone = new Map<string, CounterAddition>();
  private readonly clock: Clock;
  /** This gateway's part of a limit under `local`: the whole limit without a fleet to share it with. */
  private readonly shareOf: (limit: number) => number;
  private closed = false;

  constructor(private readonly parts: LimiterParts) {
    this.clock = parts.clock ?? systemClock;
    this.shareOf = parts.shareOf ?? ((limit) => limit);
    this.sharedUp = parts.shared !== null;
    parts.metrics.counterStoreShared.set(this.sharedUp ? 1 : 0);
  }

  /** Decides at once when this gateway can; a promise only while the shared store is asked. */
  consume(specs: readonly CounterSpec[]): LimiterVerdict | Promise<LimiterVerdict> {
    const { shared } = this.parts;
    if (!shared) return this.parts.local.consume(specs);
    if (!this.sharedUp) return this.decideWithoutShared(specs);
    const answer = shared.consume(specs);
    return answer instanceof Promise ? this.awaitShared(answer, specs) : answer;
  }

  /**
   * Adds measured units; at once on this gateway's own counters and on leases of the shared store, a
   * promise only for a trip to the shared store.
   */
  add(additions: readonly CounterAddition[]): Promise<void> | void {
    const { shared, local } = this.parts;
    if (!shared) return local.add(additions);
    if (!this.sharedUp) {
      if (this.parts.onError !== 'local') return;
      local.add(additions);
      for (const addition of additions) this.tally(addition.key, addition.windowMs, addition.amount);
      return;
    }
    const sent = shared.add(additions);
    return sent?.catch((error: unknown) => {
      this.switchToFallback(error as Error);
      // The shared store keeps these units for its next trip; they count here too meanwhile.
      if (this.parts.onError === 'local') local.add(additions);
    });
  }

  /** Units counted now by counters under `keyPrefix`, from the store that currently decides. */
  usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]> {
    const store = this.parts.shared && this.sharedUp ? this.parts.shared : this.parts.local;
    return store.usage(keyPrefix, windowMs);
  }

  /**
   * What each of `counters` holds now, from the store that currently decides; nothing is charged. A read
   * of the shared store is waited for as a decision is: past `timeoutMs` only while a PING says the store
   * is there, and a failed read or a confirmed outage hands the decisions to the policy. While the shared
   * store is away, only `onError: local` has counters (this gateway's own, which decide meanwhile);
   * `allow` and `deny` have none.
   * @throws when there is nothing to read: the shared store is away under `allow` or `deny`
   */
  async peek(counters: readonly CounterRef[]): Promise<CounterState[]> {
    const { shared, local, onError } = this.parts;
    if (!shared) return local.peek(counters);
    if (this.sharedUp) {
      try {
        const read = await this.answerOf(shared.peek(counters));
        if (read !== outageConfirmed) return read;
        this.switchToFallback(this.unansweredError());
      } catch (error) {
        this.switchToFallback(error as Error);
      }
    }
    if (onError === 'local') return local.peek(counters);
    throw new Error(`the shared counter store is unreachable and store.onError is '${onError}'`);
  }

  /** Stops probing, and hands back leases and measured units still held by the shared store. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.probeTimer !== null) this.clock.clearTimeout(this.probeTimer);
    this.probeTimer = null;
    if (this.parts.shared && this.sharedUp) await this.parts.shared.close().catch(() => undefined);
  }

  private async awaitShared(
    answer: Promise<Decision>,
    specs: readonly CounterSpec[],
  ): Promise<LimiterVerdict> {
    try {
      const decided = await this.answerOf(answer);
      if (decided !== outageConfirmed) return decided;
      this.freeSlotsOfLate(answer, specs);
      this.switchToFallback(this.unansweredError());
    } catch (error) {
      this.switchToFallback(error as Error);
    }
    return this.decideWithoutShared(specs);
  }

  /**
   * Frees the concurrency slots of a decision given up for the policy, should it still come: the request
   * is decided without it, and nothing else would ever free them.
   */
  private freeSlotsOfLate(answer: Promise<Decision>, specs: readonly CounterSpec[]): void {
    answer.then(
      (late) => {
        const keys = specs.filter((spec) => isSlotCounter(spec.windowMs)).map((spec) => spec.key);
        if (late.allowed && keys.length > 0) late.slotsFreedBy?.release(keys);
      },
      () => undefined,
    );
  }

  /**
   * The shared store's answer: within `timeoutMs`, or later while a PING says the store is there;
   * `outageConfirmed` when the PING goes unanswered first.
   */
  private async answerOf<T>(answer: Promise<T>): Promise<T | typeof outageConfirmed> {
    const inTime = await beforeDeadline(answer, this.parts.timeoutMs, this.clock);
    if (inTime !== deadlinePassed) return inTime;
    return Promise.race([
      answer,
      this.confirmOutage().then(async (down) => (down ? outageConfirmed : await answer)),
    ]);
  }

  private unansweredError(): Error {
    return new Error(`no answer within ${this.parts.timeoutMs} ms, and no answer to PING`);
  }

  /** Resolves true when a PING confirms that the store is unreachable; one PING for all late decisions. */
  private confirmOutage(): Promise<boolean> {
    if (this.confirming) return this.confirming;
    // A PING gets more time than a decision: it has to tell "down" from "busy".
    const confirmMs = Math.max(200, this.parts.timeoutMs * 4);
    this.confirming = beforeDeadline(this.parts.probe(), confirmMs, this.clock).then(
      (answered) => {
        this.confirming = null;
        if (answered === true)
          this.parts.logger.warn(
            { timeoutMs: this.parts.timeoutMs },
            'a call to the shared counter store missed its deadline; the store still answers, so it is waited for',
          );
        return answered !== true;
      },
      () => {
        this.confirming = null;
        return true;
      },
    );
    return this.confirming;
  }

  /** The decision of store.onError while the shared store is unreachable. */
  private decideWithoutShared(specs: readonly CounterSpec[]): LimiterVerdict {
    switch (this.parts.onError) {
      case 'local': {
        const decision = this.parts.local.consume(
          specs.map((spec) => ({ ...spec, limit: this.shareOf(spec.limit) })),
        );
        if (decision.allowed) for (const spec of specs) this.tally(spec.key, spec.windowMs, spec.cost);
        return decision;
      }
      case 'allow':
        return admitted;
      case 'deny':
        return 'unavailable';
    }
  }

  /** Notes units admitted alone; a slot is no unit: it is freed where it was taken (`slotsFreedBy`). */
  private tally(key: string, windowMs: number, amount: number): void {
    if (amount <= 0 || isSlotCounter(windowMs)) return;
    const held = this.admittedAlone.get(key);
    this.admittedAlone.set(key, { key, windowMs, amount: amount + (held?.amount ?? 0) });
  }

  private switchToFallback(error: Error): void {
    const { shared } = this.parts;
    if (!this.sharedUp || !shared || this.closed) return;
    this.sharedUp = false;
    shared.suspend();
    if (this.parts.onError === 'local') this.seedFallback(shared);
    this.parts.metrics.counterStoreShared.set(0);
    this.parts.metrics.counterStoreSwitches.inc({ to: this.parts.onError });
    this.parts.logger.error(
      { err: { message: error.message }, onError: this.parts.onError },
      `shared counter store unreachable: store.onError is '${this.parts.onError}' until it answers again`,
    );
    this.scheduleProbe();
  }

  /**
   * Starts this gateway's own counters from its share of what the fleet had counted when last seen,
   * charged as of then: they leave the window when the units they stand for do (a total seen a window
   * ago is gone), which may refuse a little early but never admits too much.
   */
  private seedFallback(shared: SharedCounters): void {
    this.parts.local.clear();
    this.admittedAlone.clear();
    const seeds = shared
      .lastKnown()
      .filter(({ used, limit }) => used > 0 && limit > 0)
      .map(({ key, windowMs, used, limit, at }) => ({
        key,
        windowMs,
        amount: Math.ceil((used * this.shareOf(limit)) / limit),
        at,
      }));
    this.parts.local.seed(seeds);
  }

  private scheduleProbe(): void {
    if (this.closed) return;
    this.probeTimer = this.clock.setTimeout(() => void this.probe(), this.parts.probeEveryMs ?? 250);
  }

  private async probe(): Promise<void> {
    this.probeTimer = null;
    const { shared } = this.parts;
    if (this.sharedUp || !shared || this.closed) return;
    if (!(await this.parts.probe())) return this.scheduleProbe();
    shared.resume();
    const alone = [...this.admittedAlone.values()];
    this.admittedAlone.clear();
    try {
      // The fleet's counters learn what this gateway admitted alone before they decide for it again.
      await shared.add(alone);
    } catch {
      for (const addition of alone) this.tally(addition.key, addition.windowMs, addition.amount);
      shared.suspend();
      return this.scheduleProbe();
    }
    this.sharedUp = true;
    this.parts.metrics.counterStoreShared.set(1);
    this.parts.metrics.counterStoreSwitches.inc({ to: 'shared' });
    this.parts.logger.warn('shared counter store answers again: the fleet-wide counters decide again');
  }
}
