import type { Clock } from '../kit/clock.js';
import {
  isSlotCounter,
  type CounterAddition,
  type CounterRef,
  type CounterSpec,
  type CounterState,
  type CounterUsage,
  type Decision,
} from './counter-store.js';
import type { CounterTrips, GiveBack, Trip, TripReply } from './counter-trips.js';
import { LeaseBook, type KnownTotal } from './lease-book.js';
import {
  CalendarCounters,
  calendarCheck,
  calendarDecision,
  calendarState,
  type InWindow,
} from './calendar-counters.js';
import type { SharedCounters } from './limiter.js';

export interface SharedCounterStoreOptions {
  trips: CounterTrips;
  clock: Clock;
  /** Gateways alive in the fleet (at least 1), from their heartbeat. */
  live: () => number;
  /** Counted by every trip: `/metrics` shows how many decisions needed one. */
  onTrip?: () => void;
  /**
   * Writes again how many slots this gateway holds of each counter, where the carrier keeps them as a
   * number it writes (`RedisCounterTrips.refreshSlots`): before the store decides again after an outage.
   * Absent where every hold and release is counted as it comes (the primary's counters).
   */
  refreshSlots?: () => Promise<void>;
}

/** Leases that expired are given back this long after, unless a trip has carried them by then. */
const giveBackDelayMs = 20;

/**
 * `store.type: "redis"`: the fleet's counters, with leases. A check that the leases of this gateway cover
 * is decided here, at once, with no trip; a counter known to be full is refused here until its
 * Retry-After; every other check makes one trip, which also asks for a lease sized from this gateway's
 * recent rate, carries the leftovers of expired leases back, and carries measured bytes that no lease
 * covered (those are sent at once, so no decision anywhere waits on them). A concurrency counter is
 * never leased nor known full here: every slot is taken by a trip, and freed by one sent the moment its
 * request ends; a slot this gateway took while the policy decided is counted in by one too (`hold`).
 */
export class SharedCounterStore implements SharedCounters {
  private readonly book = new LeaseBook();
  private readonly clock: Clock;
  /**
   * Calendar counters, in the windows of this gateway's clock (the fleet's, or the counters' in tests):
   * every gateway knows a window's end with no trip, and a lease never outlives it.
   */
  private readonly calendars = new CalendarCounters();
  /** Measured units whose trip failed: they travel with the next one (counted twice at worst). */
  private readonly unsent = new Map<string, CounterAddition>();
  /** Trips asking for a lease, by counter: a check arriving meanwhile waits for the lease, not a trip. */
  private readonly leasing = new Map<string, Promise<unknown>>();
  private sweepTimer: unknown = null;
  private sweepAt = Infinity;
  private suspended = false;

  constructor(private readonly options: SharedCounterStoreOptions) {
    this.clock = options.clock;
  }

  consume(counters: readonly CounterSpec[]): Decision | Promise<Decision> {
    const specs = this.calendars.inWindow(counters, this.clock.now());
    if (specs === counters) return this.decide(specs, true);
    const decision = this.decide(specs, true);
    return decision instanceof Promise
      ? decision.then((decided) => calendarDecision(specs, decided, this.clock.now()))
      : calendarDecision(specs, decision, this.clock.now());
  }

  /** Spends measured units from leases at once; only what no lease covers makes a trip (a promise). */
  add(additions: readonly CounterAddition[]): Promise<void> | void {
    const now = this.clock.now();
    let uncovered: CounterAddition[] | null = null;
    for (const addition of this.calendars.inWindow(additions, now)) {
      const amount = this.suspended
        ? addition.amount
        : this.book.spendMeasured(addition.key, addition.amount, now);
      if (amount > 0) (uncovered ??= []).push({ ...addition, amount });
    }
    if (uncovered === null) return;
    return this.send({ checks: [], additions: uncovered, giveBacks: [], live: this.options.live() }).then(
      () => undefined,
    );
  }

  /** Frees slots at once, in a trip of their own; one that fails is the carrier's to settle. */
  release(keys: readonly string[]): void {
    if (keys.length === 0) return;
    const trip = { checks: [], additions: [], giveBacks: [], releases: keys, live: this.options.live() };
    this.send(trip).catch(() => undefined);
  }

  /**
   * Counts slots this gateway took while the store could not decide as held by it, in a trip of their
   * own: the carrier writes them when the store answers, now or after the outage (`refreshSlots`).
   */
  hold(keys: readonly string[]): void {
    if (keys.length === 0) return;
    const trip = { checks: [], additions: [], giveBacks: [], holds: keys, live: this.options.live() };
    this.send(trip).catch(() => undefined);
  }

  usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]> {
    return this.options.trips.usage(keyPrefix, windowMs);
  }

  peek(counters: readonly CounterRef[]): Promise<CounterState[]> {
    const now = this.clock.now();
    const refs = this.calendars.inWindow(counters, now);
    return this.options.trips
      .peek(refs)
      .then((states) => states.map((state, i) => calendarState(refs[i]!, state.used, now) ?? state));
  }

  /** Gives every unspent lease back and sends the measured units still held, then stops its timer. */
  async close(): Promise<void> {
    if (this.sweepTimer !== null) this.clock.clearTimeout(this.sweepTimer);
    this.sweepTimer = null;
    this.book.dropAll();
    await this.send({ checks: [], additions: [], giveBacks: [], live: this.options.live() });
  }

  /**
   * The store is out of reach and the policy decides: leases end (their units go back once the store
   * answers again) and no counter stays known full. Trips that answer late bring no lease.
   */
  suspend(): void {
    this.suspended = true;
    this.book.dropAll();
  }

  /**
   * The store answers again: the slots this gateway holds are written, and `alone` (units it admitted
   * while the policy decided) is added with the leftovers of the leases that ended, before the store
   * decides again. Units that cannot be sent are kept for the next trip.
   * @throws when the store cannot be reached: it stays suspended
   */
  async resume(alone: readonly CounterAddition[]): Promise<void> {
    for (const addition of alone) this.keepUnsent(addition);
    await this.options.refreshSlots?.();
    const giveBacks = this.book.takeGiveBacks(this.clock.now());
    await this.send({ checks: [], additions: [], giveBacks, live: this.options.live() });
    this.suspended = false;
  }

  /** Each counter's total as the store last reported it, and when, to seed the counters of a fallback. */
  lastKnown(): Array<KnownTotal & { key: string }> {
    return this.book.lastKnown();
  }

  private decide(specs: readonly CounterSpec[], mayWait: boolean): Decision | Promise<Decision> {
    const now = this.clock.now();
    const book = this.book;
    let refusedFor = 0;
    for (const spec of specs) refusedFor = Math.max(refusedFor, book.knownFull(spec, now));
    if (refusedFor > 0) {
      return {
        allowed: false,
        retryAfterMs: refusedFor,
        states: specs.map((spec) => {
          const state = book.state(spec.key, now);
          const waitMs = book.knownFull(spec, now);
          return waitMs > 0 ? { used: state.used, resetMs: waitMs } : state;
        }),
      };
    }
    let uncovered: CounterSpec[] | null = null;
    for (const spec of specs) if (book.available(spec, now) < spec.need) (uncovered ??= []).push(spec);
    if (uncovered === null) {
      // The leases cover every counter: decided here, in loops, as most requests are.
      const states = new Array<CounterState>(specs.length);
      for (let i = 0; i < specs.length; i += 1) {
        const spec = specs[i]!;
        book.spend(spec.key, spec.cost, now);
        states[i] = book.state(spec.key, now);
      }
      return { allowed: true, retryAfterMs: 0, states };
    }
    if (mayWait) {
      // A lease being fetched for these counters will likely cover this check too: wait for it.
      const pending = uncovered
        .map((spec) => this.leasing.get(spec.key))
        .filter((trip) => trip !== undefined);
      if (pending.length > 0) return Promise.allSettled(pending).then(() => this.decide(specs, false));
    }
    const needTrip = uncovered;
    const covered = specs
      .filter((spec) => !needTrip.includes(spec))
      .map((spec) => ({ spec, bucket: book.spend(spec.key, spec.cost, now) }));
    return this.decideWithTrip(specs, covered, needTrip, now);
  }

  private async decideWithTrip(
    specs: readonly CounterSpec[],
    covered: ReadonlyArray<{ spec: CounterSpec; bucket: number }>,
    uncovered: readonly CounterSpec[],
    sentAt: number,
  ): Promise<Decision> {
    const checks = uncovered.map((spec) => ({
      ...spec,
      wanted: this.suspended ? 0 : this.book.wanted(spec, sentAt),
    }));
    const trip = this.send({ checks, additions: [], giveBacks: [], live: this.options.live() });
    for (const check of checks) if (check.wanted > 0) this.leasing.set(check.key, trip);
    let reply: TripReply;
    try {
      reply = await trip;
    } catch (error) {
      this.restore(covered);
      throw error;
    } finally {
      for (const check of checks) if (this.leasing.get(check.key) === trip) this.leasing.delete(check.key);
    }
    if (reply.outOfRoom) {
      // A counter the store does not hold yet would pass its memory bound: nothing was charged.
      this.restore(covered);
      return { allowed: false, retryAfterMs: reply.retryAfterMs, states: [], outOfRoom: true };
    }
    const now = this.clock.now();
    uncovered.forEach((spec: CounterSpec & InWindow, i) => {
      const checked = calendarCheck(spec, reply.checks[i]!, sentAt, now);
      reply.checks[i] = checked;
      // A late answer after the store was given up for the policy brings no lease: its units go back.
      const leased = this.suspended ? { ...checked, leased: 0 } : checked;
      if (this.suspended && checked.leased > 0)
        this.book.keepGiveBacks([
          { key: spec.key, windowMs: spec.windowMs, bucket: checked.bucket, units: checked.leased },
        ]);
      if (!isSlotCounter(spec.windowMs)) this.book.recordTrip(spec, leased, reply.allowed, sentAt, now);
    });
    if (!reply.allowed) this.restore(covered);
    this.scheduleSweep();
    const slotted = reply.allowed && uncovered.some((spec) => isSlotCounter(spec.windowMs));
    return {
      ...(slotted ? { slotsFreedBy: this } : {}),
      allowed: reply.allowed,
      retryAfterMs: reply.retryAfterMs,
      states: specs.map((spec) => {
        const at = uncovered.indexOf(spec);
        if (at === -1) return this.book.state(spec.key, now);
        const checked = reply.checks[at]!;
        return checked.waitMs > 0 ? { used: checked.used, resetMs: checked.waitMs } : checked;
      }),
    };
  }

  /** Puts the units a refused check took from leases back. */
  private restore(covered: ReadonlyArray<{ spec: CounterSpec; bucket: number }>): void {
    const now = this.clock.now();
    for (const { spec, bucket } of covered)
      this.book.restore(spec.key, spec.windowMs, spec.cost, bucket, now);
  }

  /**
   * One trip: `trip` plus the give-backs and unsent units it can carry. While the store is suspended the
   * give-backs wait for `resume`: a trip that fails drops those it carried.
   */
  private async send(trip: Trip): Promise<TripReply> {
    const giveBacks: GiveBack[] = this.suspended
      ? [...trip.giveBacks]
      : [...trip.giveBacks, ...this.book.takeGiveBacks(this.clock.now())];
    const additions = [...trip.additions, ...this.unsent.values()];
    this.unsent.clear();
    const nothing = trip.checks.length === 0 && additions.length === 0 && giveBacks.length === 0;
    const slots = (trip.releases?.length ?? 0) + (trip.holds?.length ?? 0);
    if (nothing && slots === 0) return { allowed: true, retryAfterMs: 0, checks: [] };
    this.options.onTrip?.();
    try {
      return await this.options.trips.trip({ ...trip, additions, giveBacks });
    } catch (error) {
      for (const addition of additions) this.keepUnsent(addition);
      throw error;
    }
  }

  private keepUnsent({ key, windowMs, amount }: CounterAddition): void {
    const held = this.unsent.get(key);
    this.unsent.set(key, { key, windowMs, amount: amount + (held?.amount ?? 0) });
  }

  /** Wakes at the earliest lease expiry, to give its leftovers back if no trip has carried them. */
  private scheduleSweep(): void {
    const next = this.book.nextExpiry();
    if (next === null || next + giveBackDelayMs >= this.sweepAt) return;
    if (this.sweepTimer !== null) this.clock.clearTimeout(this.sweepTimer);
    this.sweepAt = next + giveBackDelayMs;
    this.sweepTimer = this.clock.setTimeout(
      () => {
        this.sweepTimer = null;
        this.sweepAt = Infinity;
        this.send({ checks: [], additions: [], giveBacks: [], live: this.options.live() })
          .catch(() => undefined)
          .finally(() => this.scheduleSweep());
      },
      Math.max(0, this.sweepAt - this.clock.now()),
    );
  }
}
