import { bucketMsOf, type CounterSpec, type CounterState } from './counter-store.js';
import type { CheckedCounter, GiveBack } from './counter-trips.js';

/** Units of a counter charged in the shared store that this gateway may spend without asking. */
interface Lease {
  units: number;
  /** The sub-bucket they were charged to. */
  bucket: number;
  /** Local time at which the sub-bucket ends: the lease is spent before, or given back. */
  expiresAt: number;
  /** The limit it was taken under: a changed limit voids it. */
  limit: number;
  windowMs: number;
  /** The counter's total in the shared store when the lease was taken, the lease included. */
  used: number;
  /** Local time at which the oldest counted units leave the window. */
  resetAt: number;
}

/** A counter this gateway has seen: its lease, its own recent rate, and whether it is known full. */
interface Entry {
  lease: Lease | null;
  /** Units this gateway spent since `since`. */
  spent: number;
  since: number;
  /** This gateway's recent rate on the counter, units per millisecond. */
  perMs: number;
  /** Known full for checks needing at least `need`, under `limit`, until this local time. */
  full: { until: number; need: number; limit: number } | null;
  /** What the shared store last said of the counter, and when (local time), for seeding a fallback. */
  known: KnownTotal;
  lastSeen: number;
}

/** A counter's total as the shared store last said it, under `limit`, at the local time `at`. */
export interface KnownTotal {
  used: number;
  limit: number;
  windowMs: number;
  at: number;
}

/** A lease covers a rate measured over at least this long, so that a burst does not size it alone. */
const shortestRateSampleMs = 10;
/** Leases are sized for this multiple of the recent rate: a rising rate still finds units left. */
const headroom = 2;
/** Entries of counters untouched this long are forgotten. */
const forgetAfterMs = 60_000;

/** The rate of `entry` with what was spent since its last sample blended in, once that spans long enough. */
function recentRate(entry: Entry, now: number): number {
  const elapsed = now - entry.since;
  return elapsed >= shortestRateSampleMs ? (entry.perMs + entry.spent / elapsed) / 2 : entry.perMs;
}

/**
 * The leases of one gateway, keyed by counter. A lease is taken in a trip that charged it, spent locally,
 * and never outlives the sub-bucket it was charged to: it expires at the local time of the trip's
 * sending plus what the store said was left of the sub-bucket, which is never later than the
 * sub-bucket's end. So every unit admitted from a lease is admitted while its sub-bucket is current, as
 * if the store had admitted it then, and the sliding-window bound holds unchanged.
 */
export class LeaseBook {
  private readonly entries = new Map<string, Entry>();
  private readonly pendingGiveBacks: GiveBack[] = [];

  /** The units a spec can take from its lease now (0 without a live lease under the same limit). */
  available(spec: CounterSpec, now: number): number {
    const lease = this.liveLease(spec.key, now);
    return lease && lease.limit === spec.limit && lease.windowMs === spec.windowMs ? lease.units : 0;
  }

  /**
   * Takes `units` from the live lease of `key` (the caller checked `available`).
   * @returns the sub-bucket they were charged to, for `restore`
   */
  spend(key: string, units: number, now: number): number {
    const entry = this.entries.get(key)!;
    entry.lease!.units -= units;
    this.note(entry, units, now);
    return entry.lease!.bucket;
  }

  /**
   * Puts units taken by `spend` back, when the rest of the check was refused: into the lease if it is
   * still the one they came from, else back to their sub-bucket in the store (never into a lease of a
   * later sub-bucket, where they would be spent after the sub-bucket that counts them).
   */
  restore(key: string, windowMs: number, units: number, bucket: number, now: number): void {
    const entry = this.entries.get(key);
    if (entry) entry.spent -= units;
    const lease = this.liveLease(key, now);
    if (lease && lease.bucket === bucket) lease.units += units;
    else if (units > 0) this.pendingGiveBacks.push({ key, windowMs, bucket, units });
  }

  /**
   * Spends measured units from the lease of `key` where it has them; answers the units it could not
   * cover, which must reach the shared store now.
   */
  spendMeasured(key: string, amount: number, now: number): number {
    const entry = this.entries.get(key);
    if (!entry) return amount;
    this.note(entry, amount, now);
    const lease = this.liveLease(key, now);
    if (!lease) return amount;
    const covered = Math.min(lease.units, amount);
    lease.units -= covered;
    return amount - covered;
  }

  /**
   * The counter's state as this gateway knows it, for the rate-limit fields of a local decision. A counter
   * known full is refused until it has room: that wait is its reset, as `Retry-After` says it.
   */
  state(key: string, now: number): CounterState {
    const entry = this.entries.get(key);
    const lease = entry?.lease;
    if (lease) return { used: lease.used - lease.units, resetMs: Math.max(0, lease.resetAt - now) };
    const full = entry?.full;
    return { used: entry?.known.used ?? 0, resetMs: full && full.until > now ? full.until - now : 0 };
  }

  /**
   * Milliseconds the counter stays refused without asking, or 0 when the store must be asked or this
   * gateway's lease still covers the check: a trip whose lease filled the counter leaves it full for
   * every other check, but the lease's units were charged for this gateway to spend.
   */
  knownFull(spec: CounterSpec, now: number): number {
    const full = this.entries.get(spec.key)?.full;
    if (!full || full.limit !== spec.limit || spec.need < full.need) return 0;
    if (this.available(spec, now) >= spec.need) return 0;
    return Math.max(0, full.until - now);
  }

  /** Units per sub-bucket this gateway would like to lease on the counter, from its recent rate. */
  wanted(spec: CounterSpec, now: number): number {
    const entry = this.entries.get(spec.key);
    if (!entry) return 0;
    return Math.ceil(recentRate(entry, now) * bucketMsOf(spec.windowMs) * headroom);
  }

  /**
   * Records what a trip said of a counter it checked. An admitted check may bring a lease; a counter
   * without room is known full until it has room again.
   * @param sentAt the local time the trip was sent: the lease expires no later than its sub-bucket
   */
  recordTrip(
    spec: CounterSpec,
    checked: CheckedCounter,
    allowed: boolean,
    sentAt: number,
    now: number,
  ): void {
    const entry = this.entryOf(spec.key, now);
    entry.known = { used: checked.used, limit: spec.limit, windowMs: spec.windowMs, at: now };
    if (now - entry.since >= shortestRateSampleMs) {
      entry.perMs = recentRate(entry, now);
      entry.spent = 0;
      entry.since = now;
    }
    if (allowed) {
      this.note(entry, spec.cost, now);
      // Filled by this check: nothing leaves before its oldest units do, so the next one need not ask.
      entry.full =
        checked.used + spec.need > spec.limit
          ? { until: sentAt + checked.resetMs, need: spec.need, limit: spec.limit }
          : null;
      if (checked.leased > 0) this.grant(entry, spec, checked, sentAt);
      return;
    }
    entry.full =
      checked.waitMs > 0 ? { until: sentAt + checked.waitMs, need: spec.need, limit: spec.limit } : null;
  }

  /** Give-backs of leases that have expired or were dropped, to travel with the next trip. */
  takeGiveBacks(now: number): GiveBack[] {
    for (const [key, entry] of this.entries) {
      if (entry.lease && entry.lease.expiresAt <= now) this.drop(key, entry);
      else if (!entry.lease && !entry.full && now - entry.lastSeen > forgetAfterMs) this.entries.delete(key);
    }
    return this.pendingGiveBacks.splice(0);
  }

  /** Give-backs that did not reach the store: kept only while they may still be due. */
  keepGiveBacks(giveBacks: readonly GiveBack[]): void {
    this.pendingGiveBacks.push(...giveBacks);
  }

  /** The earliest local time a lease expires, or null without leases. */
  nextExpiry(): number | null {
    let next: number | null = null;
    for (const { lease } of this.entries.values()) {
      if (lease && (next === null || lease.expiresAt < next)) next = lease.expiresAt;
    }
    return next;
  }

  /** Ends every lease (to be given back when the store answers) and forgets which counters are full. */
  dropAll(): void {
    for (const [key, entry] of this.entries) {
      this.drop(key, entry);
      entry.full = null;
    }
  }

  /**
   * Each counter's total as the store last reported it, less this gateway's unspent lease, and when: the
   * units it counts were all counted by then, so they have all left the window one window after it.
   */
  lastKnown(): Array<KnownTotal & { key: string }> {
    return [...this.entries].map(([key, { known, lease }]) => ({
      ...known,
      key,
      used: Math.max(0, known.used - (lease?.units ?? 0)),
    }));
  }

  private liveLease(key: string, now: number): Lease | null {
    const entry = this.entries.get(key);
    if (!entry?.lease) return null;
    if (entry.lease.expiresAt > now) return entry.lease;
    this.drop(key, entry);
    return null;
  }

  private grant(entry: Entry, spec: CounterSpec, checked: CheckedCounter, sentAt: number): void {
    const previous = entry.lease;
    let units = checked.leased;
    if (previous && previous.bucket === checked.bucket) units += previous.units;
    else if (previous && previous.units > 0) this.giveBack(spec.key, previous);
    entry.lease = {
      units,
      bucket: checked.bucket,
      expiresAt: sentAt + checked.bucketLeftMs,
      limit: spec.limit,
      windowMs: spec.windowMs,
      used: checked.used,
      resetAt: sentAt + checked.resetMs,
    };
  }

  private drop(key: string, entry: Entry): void {
    if (entry.lease && entry.lease.units > 0) this.giveBack(key, entry.lease);
    entry.lease = null;
  }

  private giveBack(key: string, lease: Lease): void {
    this.pendingGiveBacks.push({ key, windowMs: lease.windowMs, bucket: lease.bucket, units: lease.units });
  }

  private note(entry: Entry, units: number, now: number): void {
    entry.spent += units;
    entry.lastSeen = now;
  }

  private entryOf(key: string, now: number): Entry {
    let entry = this.entries.get(key);
    if (!entry) {
      entry = {
        lease: null,
        spent: 0,
        since: now,
        perMs: 0,
        full: null,
        known: { used: 0, limit: 0, windowMs: 0, at: now },
        lastSeen: now,
      };
      this.entries.set(key, entry);
    }
    return entry;
  }
}
