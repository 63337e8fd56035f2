import type {
  CounterAddition,
  CounterRef,
  CounterSpec,
  CounterState,
  CounterUsage,
} from './counter-store.js';

/** A counter to check and charge in a trip, with the units this gateway would like to lease. */
export interface TripCheck extends CounterSpec {
  /** Units this gateway expects to spend on the counter over one whole sub-bucket (0: no lease). */
  wanted: number;
}

/** Units of a lease that were never spent, to leave the sub-bucket they were charged to. */
export interface GiveBack {
  key: string;
  windowMs: number;
  /** Index of the sub-bucket the units were charged to. */
  bucket: number;
  units: number;
}

/** What one gateway sends to the shared counters at once. */
export interface Trip {
  /** All or nothing: charged only if every one has room. */
  checks: readonly TripCheck[];
  additions: readonly CounterAddition[];
  giveBacks: readonly GiveBack[];
  /** Gateways alive in the fleet: a lease never takes more than this gateway's part of the room. */
  live: number;
  /** Slots of concurrency counters freed since the last trip, one per key given (before the checks). */
  releases?: readonly string[];
  /**
   * Slots this gateway took while the store could not decide (`store.onError: local`), one per key
   * given: counted as held by `holder`, without a check, so that the store counts every request in
   * flight (before the checks).
   */
  holds?: readonly string[];
  /**
   * Who holds the slots the checks take and the releases free: set by the carrier of the trip (a worker
   * of the primary's, a gateway of the fleet), so that a holder that dies leaves no slot held.
   */
  holder?: string;
}

export interface CheckedCounter {
  /** Units counted in the window after the trip, the lease included. */
  used: number;
  resetMs: number;
  /** Units charged beyond the cost: this gateway may spend them until the sub-bucket ends. */
  leased: number;
  /** The sub-bucket charged. */
  bucket: number;
  /** Milliseconds, on the store's clock, from the decision to the end of that sub-bucket. */
  bucketLeftMs: number;
  /** Milliseconds until the counter has room for the check's need (0 when it has). */
  waitMs: number;
}

export interface TripReply {
  allowed: boolean;
  retryAfterMs: number;
  /** One per check, in order (none when `outOfRoom`). */
  checks: CheckedCounter[];
  /**
   * Not allowed because a counter of the checks would pass the store's memory bound
   * (`store.maxCounterMemoryMb`); nothing of the checks was charged. Only the primary's memory counters
   * (`workers: N`) set it; Redis has no such bound.
   */
  outOfRoom?: boolean;
}

/** The shared counters, as one gateway reaches them. */
export interface CounterTrips {
  /**
   * @throws when the store cannot be reached or did not answer: the trip may or may not have been
   * applied, so the caller sends its additions again (counted twice at worst) and drops its give-backs
   * (never given back twice).
   */
  trip(trip: Trip): Promise<TripReply>;
  usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]>;
  peek(counters: readonly CounterRef[]): Promise<CounterState[]>;
}
