import type { AuthResult, Principal } from '../auth/authenticator.js';
import type { Clock } from '../kit/clock.js';
import type { CounterAddition, CounterState } from '../limiter/counter-store.js';
import { KnownRooms, type KnownRoom } from '../limiter/known-rooms.js';
import type { Limiter, LimiterVerdict } from '../limiter/limiter.js';
import type { Logger } from '../observe/log.js';
import { additionTo, type ApplicableRestriction } from '../quota/quota-index.js';
import type { ExchangeCut } from './answers/cut.js';
import type { ByteMeter } from '../upstream/byte-meter.js';

/** Milliseconds between two looks at every open exchange: its bytes charged, its credentials checked. */
export const exchangeTickMs = 1_000;

/** How a request's quota check ended, for the access log; `shadow_refused` when admitted against a shadow restriction. */
export type QuotaOutcome = 'allowed' | 'rejected' | 'unavailable' | 'shadow_refused';

/**
 * What the tick reads and writes of an open exchange (a forwarded request, a WebSocket among them): the
 * gateway's record of it, which carries the links of the list it is on.
 */
export interface OpenExchange {
  readonly id: string;
  readonly principal: Principal | null;
  /** Its request authenticated again, by the authenticator of the data plane it came on. */
  authenticateAgain(): AuthResult | Promise<AuthResult>;
  /** The throttlemb restrictions that admitted it, shadow ones among them. */
  readonly byteCounters: readonly ApplicableRestriction[];
  /** The states of its enforced byte counters as its admission left them, in their order. */
  readonly byteStates: ReadonlyArray<CounterState | undefined>;
  /** Bytes it moved that no counter has been charged yet. */
  unchargedBytes(): number;
  /** Bytes charged so far: the tick charges the rest, and so does the account at the end. */
  chargedBytes: number;
  /** Charges its bytes as they pass, set while it is open with an enforced byte restriction. */
  meter: MeteredBytes | null;
  quota: QuotaOutcome | null;
  addRefusal(restriction: ApplicableRestriction): void;
  /** Whether it is running at all: a WebSocket is not until the upstream answered 101, nor after it ended. */
  running(): boolean;
  /** Ends it while it runs, in its protocol's form. */
  cut(why: ExchangeCut): void;
  /** The neighbours on the list of open exchanges (null when it is not on it): no allocation per request. */
  previousOpen: OpenExchange | null;
  nextOpen: OpenExchange | null;
}

export interface OpenExchangesParts {
  timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /** The authenticators' clock, in milliseconds: a principal's `expiresAt` is read on it. */
  now: () => number;
  limiter: Limiter;
  logger: Logger;
  /** A number that changes whenever keys or applications do: credentials are checked again after it. */
  credentialsGeneration?: () => number;
  /** The gateways that share the counters (their heartbeat, or the workers of the primary): 1 alone. */
  liveGateways?: () => number;
}

/**
 * An open exchange's meter (`ByteMeter`): its enforced byte restrictions, the rooms of their counters,
 * and how much of its uncharged bytes those rooms have taken.
 */
export class MeteredBytes implements ByteMeter {
  /** Of the exchange's uncharged bytes, those the rooms have taken. */
  counted = 0;

  constructor(
    readonly exchange: OpenExchange,
    /** Its enforced byte restrictions, one per counter. */
    readonly enforced: readonly ApplicableRestriction[],
    /** The room of each of their counters, in their order. */
    readonly rooms: ReadonlyArray<KnownRoom<OpenExchange>>,
    private readonly open: OpenExchanges,
  ) {}

  moved(): boolean | Promise<boolean> {
    return this.open.moved(this);
  }
}

const isPromise = <T>(value: T | Promise<T>): value is Promise<T> => value instanceof Promise;

/** `amount` added to the counter of each of `restrictions`. */
export const additionsOf = (
  restrictions: readonly ApplicableRestriction[],
  amount: number,
): CounterAddition[] => restrictions.map((restriction) => additionTo(restriction, amount));

/**
 * The exchanges forwarded from this gateway and not yet ended (plain requests, event streams, downloads,
 * gRPC calls, WebSockets), and the tick that looks at each of them once a second while any is open
 * (DESIGN.md round 4): a long-lived exchange is charged as it runs, not only when it ends, and ends when
 * its bytes find no room or its credentials no longer hold (revoked, or past their expiry). An exchange
 * with enforced byte restrictions is also charged as its bytes pass (`moved`): the room each counter
 * has left, as this process knows it (`KnownRooms`), is shared by the exchanges on it, and the bytes
 * that fill it are charged at once, whatever the tick. An exchange is linked into an intrusive list
 * (two fields of its record, no allocation), so that one which ends before the tick costs two links
 * and two unlinks; the timer runs only while the list is not empty.
 */
export class OpenExchanges {
  private first: OpenExchange | null = null;
  private timer: unknown = null;
  /** `credentialsGeneration` when the open exchanges' credentials were last known good. */
  private checkedGeneration: number;
  /** The room of each byte counter the open exchanges are charged on as their bytes pass. */
  private readonly rooms: KnownRooms<OpenExchange>;

  constructor(private readonly parts: OpenExchangesParts) {
    this.checkedGeneration = parts.credentialsGeneration?.() ?? 0;
    this.rooms = new KnownRooms(parts.liveGateways);
  }

  /**
   * Puts a forwarded exchange on the list; one with enforced byte restrictions gets its meter, and joins
   * the rooms of their counters with the totals its admission saw.
   */
  add(exchange: OpenExchange): void {
    exchange.previousOpen = null;
    exchange.nextOpen = this.first;
    if (this.first) this.first.previousOpen = exchange;
    this.first = exchange;
    this.timer ??= this.parts.timers.setTimeout(this.tick, exchangeTickMs);
    if (exchange.byteCounters.length > 0) this.meter(exchange);
  }

  private meter(exchange: OpenExchange): void {
    const enforced = exchange.byteCounters.filter((restriction) => !restriction.shadow);
    if (enforced.length === 0) return;
    const rooms = enforced.map((restriction, i) =>
      this.rooms.join(
        exchange,
        restriction.counterKey,
        restriction.limit,
        exchange.byteStates[i]?.used ?? null,
      ),
    );
    exchange.meter = new MeteredBytes(exchange, enforced, rooms, this);
  }

  /**
   * Takes an exchange off the list (one that is not on it is left alone), and off the rooms it counted
   * in: what it moved uncharged is charged by its end's account, at once.
   */
  delete(exchange: OpenExchange): void {
    const { meter } = exchange;
    if (meter !== null) {
      exchange.meter = null;
      const rest = exchange.unchargedBytes();
      for (const room of meter.rooms) this.rooms.leave(room, exchange, meter.counted, rest);
    }
    const { previousOpen, nextOpen } = exchange;
    if (previousOpen) previousOpen.nextOpen = nextOpen;
    else if (this.first === exchange) this.first = nextOpen;
    else return;
    if (nextOpen) nextOpen.previousOpen = previousOpen;
    exchange.previousOpen = exchange.nextOpen = null;
  }

  /** Each open exchange, for a shutdown's end of grace. */
  *[Symbol.iterator](): IterableIterator<OpenExchange> {
    for (let exchange = this.first; exchange !== null; exchange = exchange.nextOpen) yield exchange;
  }

  private readonly tick = (): void => {
    if (this.first === null) {
      this.timer = null;
      return;
    }
    this.timer = this.parts.timers.setTimeout(this.tick, exchangeTickMs);
    const generation = this.parts.credentialsGeneration?.() ?? 0;
    const recheck = generation !== this.checkedGeneration;
    this.checkedGeneration = generation;
    const now = this.parts.now();
    // The next link is read first: ending an exchange may take it off the list at once.
    let next: OpenExchange | null = this.first;
    while (next !== null) {
      const exchange: OpenExchange = next;
      next = exchange.nextOpen;
      if (!exchange.running()) continue;
      if (exchange.byteCounters.length > 0) this.charge(exchange);
      const { principal } = exchange;
      if (principal === null) continue;
      // Credentials with a lifetime (a JWT's exp) end the exchanges they opened when it is over.
      if (principal.expiresAt !== undefined && now >= principal.expiresAt) {
        if (exchange.running()) exchange.cut('expired');
      } else if (recheck) this.recheckCredentials(exchange);
    }
  };

  /**
   * An open exchange's meter heard bytes pass (`ByteMeter.moved`): they are taken from the rooms of its
   * counters. When a room has none left, every exchange on it is charged at once what it moved, this one
   * last, and its verdict is what this answers: so the room is shared, and a flood ends within one chunk
   * per exchange past the limit (docs/quotas.md, "Counting").
   */
  moved(meter: MeteredBytes): boolean | Promise<boolean> {
    const { exchange, rooms } = meter;
    const uncharged = exchange.unchargedBytes();
    const grew = uncharged - meter.counted;
    if (grew <= 0) return true;
    meter.counted = uncharged;
    let full = false;
    for (const room of rooms) if (this.rooms.passed(room, grew)) full = true;
    if (!full) return true;
    for (const room of rooms) {
      if (!this.rooms.full(room)) continue;
      for (const member of [...room.members])
        if (member !== exchange && member.running()) this.charge(member);
    }
    return this.charge(exchange);
  }

  /**
   * Charges an open exchange's byte restrictions what it moved since its last charge. When an enforced
   * one has no room for it, the bytes are counted all the same and the exchange ends. Answers whether
   * it may go on (a promise while the store decides; never rejected).
   */
  private charge(exchange: OpenExchange): boolean | Promise<boolean> {
    const moved = exchange.unchargedBytes();
    if (moved <= 0) return true;
    exchange.chargedBytes += moved;
    const shadows = exchange.byteCounters.filter((restriction) => restriction.shadow);
    if (shadows.length > 0) this.count(exchange, additionsOf(shadows, moved));
    const { meter } = exchange;
    if (meter === null) return true;
    const { enforced, rooms } = meter;
    for (const room of rooms) this.rooms.charging(room, meter.counted, moved);
    meter.counted = 0;
    const specs = enforced.map(({ counterKey, limit, windowMs, calendar }) => ({
      key: counterKey,
      limit,
      windowMs,
      ...(calendar ? { calendar } : {}),
      cost: moved,
      need: moved,
    }));
    const settle = (verdict: LimiterVerdict): boolean => {
      if (verdict === 'unavailable' || verdict.outOfRoom) {
        for (const room of rooms) this.rooms.undecided(room, moved);
        return true;
      }
      // A refused charge is counted all the same, by an addition: its bytes stay unanswered until the
      // store has it, lest an answer sent before it (which knows nothing of them) make room of them.
      const answered = verdict.allowed ? moved : 0;
      rooms.forEach((room, i) => {
        this.rooms.answered(room, answered, verdict.states[i]?.used ?? null, enforced[i]!.limit);
      });
      if (verdict.allowed) return true;
      this.count(exchange, additionsOf(enforced, moved), () => {
        for (const room of rooms) this.rooms.answered(room, moved, null, room.limit);
      });
      exchange.quota = 'rejected';
      enforced.forEach((restriction, i) => {
        if ((verdict.states[i]?.used ?? 0) + moved > restriction.limit) exchange.addRefusal(restriction);
      });
      if (exchange.running()) exchange.cut('quota');
      return false;
    };
    const verdict = this.parts.limiter.consume(specs);
    if (!isPromise(verdict)) return settle(verdict);
    return verdict.then(settle, (error: unknown) => {
      this.failed(exchange, error);
      for (const room of rooms) this.rooms.undecided(room, moved);
      return true;
    });
  }

  /** Adds bytes the exchange moved to counters, then calls `then` (when given): a failure is logged. */
  private count(exchange: OpenExchange, additions: CounterAddition[], then?: () => void): void {
    const added = this.parts.limiter.add(additions);
    if (added === undefined) return then?.();
    added.catch((error: unknown) => this.failed(exchange, error)).finally(then);
  }

  private failed(exchange: OpenExchange, error: unknown): void {
    this.parts.logger.error(
      { err: error, requestId: exchange.id },
      'charging the bytes of an open exchange failed',
    );
  }

  /** Authenticates an open exchange's request again: a key revoked or an application deleted ends it. */
  private recheckCredentials(exchange: OpenExchange): void {
    const settle = (auth: AuthResult): void => {
      const revoked = auth.ok
        ? auth.principal?.application !== exchange.principal?.application
        : auth.reject === 'unauthorized';
      if (revoked && exchange.running()) exchange.cut('revoked');
    };
    const warn = (error: unknown): void => {
      this.parts.logger.warn(
        { err: error, requestId: exchange.id },
        'checking the credentials of an open exchange failed',
      );
    };
    let auth: AuthResult | Promise<AuthResult>;
    try {
      auth = exchange.authenticateAgain();
    } catch (error) {
      return warn(error);
    }
    if (!isPromise(auth)) return settle(auth);
    auth.then(settle, warn);
  }
}
