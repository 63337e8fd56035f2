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
  type SlotRelease,
} from './counter-store.js';
import type { KnownTotal } from './lease-book.js';
import type { MemoryCounterStore } from './memory-counter-store.js';
import { OutageDetector, type OutageThresholds } from './outage-detector.js';

/** What the gateway does while the shared counters cannot decide (`store.onError`). */
export const onErrorPolicies = ['local', 'allow', 'deny'] as const;
export type OnError = (typeof onErrorPolicies)[number];

/** What to do with a request: a decision of the counters, or "the store is down and policy is deny". */
export type LimiterVerdict = Decision | 'unavailable';

/** The fleet's counters as the limiter drives them through an outage. */
export interface SharedCounters extends CounterStore, SlotRelease {
  /** The store is out of reach: end leases, forget what is known full. */
  suspend(): void;
  /**
   * The store answers again: write the slots this gateway holds, add `alone` (units it admitted while
   * the policy decided, kept by the store from now on, until they are sent), then decide again.
   * @throws when the store cannot be reached: it stays suspended
   */
  resume(alone: readonly CounterAddition[]): Promise<void>;
  /**
   * Counts slots this gateway took while the policy decided as held by it: the store counts them now,
   * or once it answers again, so that it counts every request in flight. Never fails, never waits.
   */
  hold(keys: readonly string[]): void;
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
  /** Milliseconds between probes while the shared store fails to answer. */
  probeEveryMs?: number;
  /** How many failures over how long confirm an outage, and how long answers must last to end one. */
  outage?: Readonly<OutageThresholds>;
  /** This gateway's part of a limit while every gateway decides alone (`onError: local`). */
  shareOf?: (limit: number) => number;
  clock?: Clock;
  logger: Logger;
  metrics: Metrics;
}

const admitted: Decision = { allowed: true, retryAfterMs: 0, states: [] };
/** What a late call to the shared store resolves with, for the limiter, once its PING went unanswered. */
const pingUnanswered = Symbol('PING unanswered');

/** The keys of the concurrency counters among `specs`. */
const slotKeysOf = (specs: readonly CounterSpec[]): string[] =>
  specs.filter((spec) => isSlotCounter(spec.windowMs)).map((spec) => spec.key);

/**
 * Puts the counter stores behind the declared failure policy (store.onError). While the shared store
 * answers, it decides, however long it takes: a decision that misses `timeoutMs` waits on while a PING
 * (given four times as long) is asked whether the store is there, so a slow Redis never lets counters
 * that have not seen the fleet's traffic decide. A decision that cannot wait any more (its call failed,
 * or the PING went unanswered) is decided by the policy, that request alone; the counting mode of this
 * gateway switches only once an outage is confirmed, with hysteresis (`OutageDetector`): failures in a
 * row over a span declare it, and answers over a span end it, so one late answer never flips the mode.
 * With `local`, each gateway then enforces its share of every limit (the limit ÷ the live gateways),
 * seeded with the totals it last saw, and when the store answers again the units and the slots it
 * counted alone are added to the shared counters. Each switch is logged once. A request never waits for
 * a store that is down: a call on a lost connection fails at once, and every call has the Redis client's
 * command timeout.
 *
 * This gateway's own counters count every request it has in flight, whichever store took its slot, so
 * that a fallback counts its slots against its share from the first request.
 */
export class Limiter {
  /** The shared store decides: it answers, or an outage is only suspected. */
  private sharedUp: boolean;
  private readonly outage: OutageDetector;
  private probeTimer: unknown = null;
  private confirming: Promise<boolean> | null = null;
  /** Units this gateway admitted alone, to add to the shared counters once they answer. */
  private readonly admittedAlone = new Map<string, CounterAddition>();
  private readonly clock: Clock;
  /** This gateway's part of a limit under `local`: the whole limit without a fleet to share it with. */
  private readonly shareOf: (limit: number) => number;
  /** Frees a slot in both stores: this gateway's own counters count it too, wherever it was taken. */
  private readonly slotStores: SlotRelease;
  private closed = false;

  constructor(private readonly parts: LimiterParts) {
    this.clock = parts.clock ?? systemClock;
    this.shareOf = parts.shareOf ?? ((limit) => limit);
    this.sharedUp = parts.shared !== null;
    this.outage = new OutageDetector(() => this.clock.now(), parts.outage);
    const { shared, local } = parts;
    this.slotStores = {
      release(keys) {
        local.release(keys);
        shared?.release(keys);
      },
    };
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
      for (const addition of additions) this.tally(addition, addition.amount);
      return;
    }
    const sent = shared.add(additions);
    return sent?.then(
      () => this.answered(),
      (error: unknown) => {
        this.failed(error as Error);
        // The shared store keeps these units for its next trip; they count here too meanwhile.
        if (this.parts.onError === 'local') local.add(additions);
      },
    );
  }

  /** Units counted now by counters under `keyPrefix`, from the store that currently decides. */
  usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]> {
    const store = this.parts.shared && this.sharedUp ? this.parts.shared : this.parts.local;
    return store.usage(keyPrefix, windowMs);
  }

  /**
   * What each of `counters` holds now, from the store that currently decides; nothing is charged. A read
   * of the shared store is waited for as a decision is: past `timeoutMs` only while a PING says the store
   * is there; a failed read, or an unanswered PING, reads what the policy has instead. While the shared
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
        if (read !== pingUnanswered) {
          this.answered();
          return read;
        }
      } catch (error) {
        this.failed(error as Error);
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
      if (decided !== pingUnanswered) {
        this.answered();
        return this.heldHereToo(decided, specs);
      }
      this.freeSlotsOfLate(answer, specs);
    } catch (error) {
      this.failed(error as Error);
    }
    return this.decideWithoutShared(specs);
  }

  /**
   * A decision of the shared store that took slots: this gateway's own counters count them too, so that
   * a fallback knows every request in flight here, and they are freed in both.
   */
  private heldHereToo(decision: Decision, specs: readonly CounterSpec[]): Decision {
    if (!decision.slotsFreedBy) return decision;
    this.parts.local.hold(slotKeysOf(specs));
    return { ...decision, slotsFreedBy: this.slotStores };
  }

  /**
   * Frees the concurrency slots of a decision given up for the policy, should it still come: the request
   * is decided without it, and nothing else would ever free them.
   */
  private freeSlotsOfLate(answer: Promise<Decision>, specs: readonly CounterSpec[]): void {
    answer.then(
      (late) => {
        const keys = slotKeysOf(specs);
        if (late.allowed && keys.length > 0) late.slotsFreedBy?.release(keys);
      },
      () => undefined,
    );
  }

  /**
   * The shared store's answer: within `timeoutMs`, or later while a PING says the store is there;
   * `pingUnanswered` when the PING goes unanswered first.
   */
  private async answerOf<T>(answer: Promise<T>): Promise<T | typeof pingUnanswered> {
    const inTime = await beforeDeadline(answer, this.parts.timeoutMs, this.clock);
    if (inTime !== deadlinePassed) return inTime;
    return Promise.race([
      answer,
      this.confirmOutage().then(async (down) => (down ? pingUnanswered : await answer)),
    ]);
  }

  /**
   * Resolves true when a PING goes unanswered, which counts as one failure of the store; one PING for all
   * late decisions.
   */
  private confirmOutage(): Promise<boolean> {
    if (this.confirming) return this.confirming;
    this.confirming = this.pingAnswers().then((answers) => {
      this.confirming = null;
      if (answers) {
        this.parts.logger.warn(
          { timeoutMs: this.parts.timeoutMs },
          'a call to the shared counter store missed its deadline; the store still answers, so it is waited for',
        );
        this.answered();
      } else {
        this.failed(new Error(`no answer within ${this.parts.timeoutMs} ms, and no answer to PING`));
      }
      return !answers;
    });
    return this.confirming;
  }

  /** Whether the store answers a PING in time: it gets more than a decision, to tell "down" from "busy". */
  private async pingAnswers(): Promise<boolean> {
    const confirmMs = Math.max(200, this.parts.timeoutMs * 4);
    try {
      return (await beforeDeadline(this.parts.probe(), confirmMs, this.clock)) === true;
    } catch {
      return false;
    }
  }

  /** The decision of store.onError while the shared store cannot decide. */
  private decideWithoutShared(specs: readonly CounterSpec[]): LimiterVerdict {
    switch (this.parts.onError) {
      case 'local': {
        const decision = this.parts.local.consume(
          specs.map((spec) => ({ ...spec, limit: this.shareOf(spec.limit) })),
        );
        if (!decision.allowed) return decision;
        for (const spec of specs) this.tally(spec, spec.cost);
        if (!decision.slotsFreedBy) return decision;
        // The fleet counts these slots too: the shared store learns of them now, or once it answers.
        this.parts.shared?.hold(slotKeysOf(specs));
        return { ...decision, slotsFreedBy: this.slotStores };
      }
      case 'allow':
        return admitted;
      case 'deny':
        return 'unavailable';
    }
  }

  /** Notes units admitted alone; a slot is no unit: it is counted in by `hold` as it is taken. */
  private tally({ key, windowMs, calendar }: CounterRef, amount: number): void {
    if (amount <= 0 || isSlotCounter(windowMs)) return;
    const held = this.admittedAlone.get(key);
    const total = amount + (held?.amount ?? 0);
    // A calendar counter's units go to the window of the shared store's clock when it answers again.
    this.admittedAlone.set(
      key,
      calendar ? { key, windowMs, calendar, amount: total } : { key, windowMs, amount: total },
    );
  }

  /** The units admitted alone so far, handed over: the caller passes them to the shared store. */
  private takeAlone(): CounterAddition[] {
    const alone = [...this.admittedAlone.values()];
    this.admittedAlone.clear();
    return alone;
  }

  /**
   * The shared store failed to answer (a call failed, a PING went unanswered). The first failure of a
   * run seeds this gateway's own counters, for the requests the policy decides one at a time, and starts
   * the probe; the one that confirms the outage hands every decision to the policy.
   */
  private failed(error: Error): void {
    const { shared } = this.parts;
    if (!shared || this.closed) return;
    const starting = this.outage.standing === 'answering';
    const change = this.outage.failed();
    if (starting) {
      if (this.parts.onError === 'local') this.seedFallback(shared);
      this.parts.logger.warn(
        { err: { message: error.message }, onError: this.parts.onError },
        'the shared counter store failed to answer: what it cannot decide goes to store.onError until it answers, or the outage is confirmed',
      );
      this.scheduleProbe();
    }
    if (change === 'confirmed') this.switchToFallback(shared, error);
  }

  /** The shared store answered a call or a PING. */
  private answered(): void {
    if (this.outage.answered() === 'cleared') this.failuresCleared();
  }

  /** A run of failures that confirmed no outage is over: the store decides as it did all along. */
  private failuresCleared(): void {
    this.handOverAlone();
    this.parts.logger.info('the shared counter store answers again; no outage was confirmed');
  }

  /** Adds what this gateway admitted alone to the shared counters, which keep it until it is sent. */
  private handOverAlone(): void {
    if (this.admittedAlone.size === 0) return;
    void this.parts.shared?.add(this.takeAlone())?.catch(() => undefined);
  }

  private switchToFallback(shared: SharedCounters, error: Error): void {
    this.sharedUp = false;
    shared.suspend();
    this.parts.metrics.counterStoreShared.set(0);
    this.parts.metrics.counterStoreSwitches.inc({ to: this.parts.onError });
    this.parts.logger.error(
      { err: { message: error.message }, onError: this.parts.onError },
      `shared counter store unreachable: store.onError is '${this.parts.onError}' until it answers again`,
    );
  }

  /**
   * Starts this gateway's own counters from its share of what the fleet had counted when last seen,
   * charged as of then: they leave the window when the units they stand for do (a total seen a window
   * ago is gone), which may refuse a little early but never admits too much. Its slots stay: they are
   * the requests it has in flight.
   */
  private seedFallback(shared: SharedCounters): void {
    this.parts.local.clear();
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
    if (this.closed || this.probeTimer !== null) return;
    this.probeTimer = this.clock.setTimeout(() => void this.probe(), this.parts.probeEveryMs ?? 250);
  }

  /** Asks the store a PING while it fails to answer, until it answers for good. */
  private async probe(): Promise<void> {
    this.probeTimer = null;
    const { shared } = this.parts;
    if (!shared || this.closed || !this.probing) return;
    if (!(await this.pingAnswers())) {
      this.failed(new Error('no answer to PING'));
      return this.scheduleProbe();
    }
    if (this.closed) return;
    const change = this.outage.answered();
    if (change === 'cleared') this.failuresCleared();
    if (change === 'over') await this.decideWithShared(shared);
    if (this.probing) this.scheduleProbe();
  }

  /** Whether the store is probed: from a first failure until it decides again. */
  private get probing(): boolean {
    return this.outage.standing !== 'answering';
  }

  /**
   * The outage is over: the fleet's counters learn what this gateway counted alone (units and slots)
   * before they decide for it again.
   */
  private async decideWithShared(shared: SharedCounters): Promise<void> {
    try {
      await shared.resume(this.takeAlone());
    } catch {
      this.outage.stillAway();
      return;
    }
    if (this.closed) return;
    this.outage.decidesAgain();
    this.sharedUp = true;
    // Decided alone while the store was being told: handed over now.
    this.handOverAlone();
    this.parts.metrics.counterStoreShared.set(1);
    this.parts.metrics.counterStoreSwitches.inc({ to: 'shared' });
    this.parts.logger.warn('shared counter store answers again: the fleet-wide counters decide again');
  }
}
