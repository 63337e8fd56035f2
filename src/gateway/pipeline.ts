import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { systemClock, type Clock } from '../kit/clock.js';
import type { Limiter } from '../limiter/limiter.js';
import type { AccessLog } from '../observe/access-log.js';
import type { Logger } from '../observe/log.js';
import type { Metrics } from '../observe/metrics.js';
import type { Tracing } from '../observe/tracing.js';
import type { ThresholdAlerts } from '../notifications/threshold-alerts.js';
import { CallerBook } from '../quota/caller-book.js';
import type { QuotaIndex } from '../quota/quota-index.js';
import type { UsageBook } from '../quota/usage-history.js';
import { exchangeOf, type Exchange, type UpstreamProxy } from '../upstream/upstream-proxy.js';
import { refuse } from './answers/refusal.js';
import { responseOnSocket } from './edge/websocket-handshake.js';
import { OpenExchanges } from './open-exchanges.js';
import type { ExchangeRecord } from './record.js';
import type { RuleSet } from './rule-set.js';
import { account, restOfAnswerRead } from './steps/account.js';
import { admit } from './steps/admit.js';
import { authenticate } from './steps/authenticate.js';
import type { Next, StepContext } from './steps/context.js';
import { forward } from './steps/forward.js';
import { identify } from './steps/identify.js';
import { route } from './steps/route.js';
import { startTrace } from './server-span.js';
import { usage } from './steps/usage.js';
import { UsageBudget } from './usage-endpoint.js';

export interface GatewayParts {
  /** The catalog, authenticator and header rules to start with; `swap` replaces them. */
  dataPlane: RuleSet;
  proxy: UpstreamProxy;
  /** The quota definitions as compiled now; they change while the gateway runs. */
  quotas: () => QuotaIndex;
  limiter: Limiter;
  logger: Logger;
  /** Where the access lines go; null when the log level leaves them out. */
  accessLog: AccessLog | null;
  metrics: Metrics;
  /** Where each exchange's trace starts (its server span); none when tracing is off. */
  tracing?: Tracing | null;
  /** Where admitted and refused requests are counted for the usage history; none when it is off. */
  usageBook?: UsageBook;
  /**
   * The clock of the usage path's budgets and of the caller counts, of durations, of the open exchanges'
   * tick and of a shutdown's grace period (the system's unless a test moves it).
   */
  clock?: Clock;
  /**
   * The authenticators' clock (the system's unless a test moves it): the open exchanges whose
   * credentials have an expiry (a JWT's exp) end by it.
   */
  credentialsNow?: () => number;
  /**
   * A number that changes whenever keys or applications do (the application directory's generation):
   * the open exchanges' credentials are checked again on the tick after it changed.
   */
  credentialsGeneration?: () => number;
  /**
   * The gateways that share the counters (1 alone): an open exchange's bytes pass uncharged up to this
   * gateway's share of the room it knows of.
   */
  liveGateways?: () => number;
  /** Watches admitted requests' counts for alert thresholds (`notifications`); none without webhooks. */
  alerts?: ThresholdAlerts | null;
}

type Step = (context: StepContext, record: ExchangeRecord) => Next;

/**
 * The steps of DESIGN.md's "One proxied request", after `identify` made the record and before `account`
 * ends it: each answers whether the next runs (`Next`).
 */
const steps: readonly Step[] = [route, authenticate, usage, admit, forward];

/**
 * The per-request pipeline of the data plane: identify, then the steps in order, then (once the response
 * has closed) account. A step is a module function of the record; `run` is the one place that tells a
 * value from a promise, and goes on at once when a step did not have to wait, so that a request that
 * needs no I/O to be decided makes no promise. It also counts the requests in flight, drains them at a
 * shutdown, and swaps the rule set a reload made.
 */
export class Gateway implements StepContext {
  readonly proxy: UpstreamProxy;
  readonly quotas: () => QuotaIndex;
  readonly limiter: Limiter;
  readonly logger: Logger;
  readonly accessLog: AccessLog | null;
  readonly metrics: Metrics;
  readonly tracing: Tracing | null;
  readonly usageBook: UsageBook | null;
  readonly clock: Clock;
  readonly callers: CallerBook;
  readonly usageBudget = new UsageBudget();
  readonly openExchanges: OpenExchanges;
  readonly alerts: ThresholdAlerts | null;
  rejectedLines = 0;
  private inFlight = 0;
  private draining = false;
  private idleWaiters: Array<() => void> = [];
  private current: RuleSet;

  constructor(parts: GatewayParts) {
    this.current = parts.dataPlane;
    this.proxy = parts.proxy;
    this.quotas = parts.quotas;
    this.limiter = parts.limiter;
    this.logger = parts.logger;
    this.accessLog = parts.accessLog;
    this.metrics = parts.metrics;
    this.tracing = parts.tracing ?? null;
    this.usageBook = parts.usageBook ?? null;
    this.alerts = parts.alerts ?? null;
    const clock = parts.clock ?? systemClock;
    this.clock = clock;
    this.callers = new CallerBook(() => clock.now());
    this.openExchanges = new OpenExchanges({
      timers: clock,
      now: parts.credentialsNow ?? systemClock.now,
      limiter: parts.limiter,
      logger: parts.logger,
      ...(parts.credentialsGeneration ? { credentialsGeneration: parts.credentialsGeneration } : {}),
      ...(parts.liveGateways ? { liveGateways: parts.liveGateways } : {}),
    });
  }

  /** The rule set new requests start on. */
  get dataPlane(): RuleSet {
    return this.current;
  }

  /**
   * Puts a reloaded rule set in force for the requests that come from now on; those in flight finish
   * on the one they started on, which then closes.
   */
  swap(next: RuleSet): void {
    const previous = this.current;
    this.current = next;
    previous.retire();
  }

  /** The `request` listener of the data-plane servers (and of the HTTP/2 transport's streams). */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.enter(req, res, false, null);
  };

  /**
   * The `checkContinue` listener of the data-plane servers (Node emits it for `Expect: 100-continue`):
   * Node would otherwise answer `100 Continue` at once, inviting the body of a request that is not yet
   * authenticated.
   */
  readonly handleExpectingContinue = (req: IncomingMessage, res: ServerResponse): void => {
    this.enter(req, res, true, null);
  };

  /**
   * The `upgrade` listener of the data-plane servers (Node emits it for `Connection: upgrade`): the
   * request goes through the pipeline as any other, its answer written on its socket; an admitted
   * WebSocket opening goes upstream through http-proxy-3's `ws()`.
   */
  readonly handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    this.enter(req, responseOnSocket(req, socket as Socket), false, head);
  };

  /** The 'close' listener of every response: `this` is the response, linked to its record. */
  private readonly responseClosed = ((gateway: Gateway) =>
    function (this: ServerResponse): void {
      account(gateway, exchangeOf(this) as ExchangeRecord);
    })(this);

  /** Told by a record whose answer was read after its client left, once that reading is over. */
  readonly restOfAnswerRead = (exchange: Exchange): void => restOfAnswerRead(this, exchange);

  private enter(
    req: IncomingMessage,
    res: ServerResponse,
    expectsContinue: boolean,
    head: Buffer | null,
  ): void {
    const record = identify(req, res, expectsContinue, head, this.current, this.draining);
    if (this.tracing !== null) startTrace(this.tracing, record);
    this.inFlight += 1;
    res.on('close', this.responseClosed);
    this.run(record, 0);
  }

  /**
   * Runs the steps from `from` on: on at once while a step answers a value, after it when it answers a
   * promise; a step that throws, or a promise that fails, answers 500.
   */
  private run(record: ExchangeRecord, from: number): void {
    for (let at = from; at < steps.length; at += 1) {
      let next: Next;
      try {
        next = steps[at]!(this, record);
      } catch (error) {
        this.failed(record, error);
        return;
      }
      if (next === true) continue;
      if (next !== false) {
        next.then(
          (go) => {
            if (go) this.run(record, at + 1);
          },
          (error: unknown) => this.failed(record, error),
        );
      }
      return;
    }
  }

  private failed(record: ExchangeRecord, error: unknown): void {
    this.logger.error({ err: error, requestId: record.id }, 'request pipeline failed');
    refuse(record, 'internal_error');
  }

  /** From now on every response asks the client to close its connection. */
  startDraining(): void {
    this.draining = true;
  }

  /**
   * Ends every open WebSocket (close code 1001, going away) and cuts off the upgrade requests still
   * waiting for the upstream: the end of a shutdown's grace period.
   */
  endWebSockets(): void {
    for (const exchange of this.openExchanges) {
      const record = exchange as ExchangeRecord;
      if (record.form !== 'opening') continue;
      if (record.webSocket) record.webSocket.end(1001, 'gateway shutting down', 'shutdown');
      else record.req.socket.destroy();
    }
  }

  /**
   * Resolves true when no request is in flight (nor an answer still read for its units after its client
   * left), or false when `timeoutMs` passes first.
   */
  waitForIdle(timeoutMs: number): Promise<boolean> {
    if (this.inFlight === 0) return Promise.resolve(true);
    const { clock } = this;
    return new Promise((resolve) => {
      const timer = clock.setTimeout(() => resolve(false), timeoutMs);
      this.idleWaiters.push(() => {
        clock.clearTimeout(timer);
        resolve(true);
      });
    });
  }

  /** One request less in flight: a shutdown waiting for none goes on when it was the last. */
  done(): void {
    this.inFlight -= 1;
    if (this.inFlight === 0) {
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }
}
