import type { IncomingMessage } from 'node:http';
import { errors, type Dispatcher } from 'undici';
import type { AddedLatencySink } from '../observe/added-latency.js';
import { systemClock, type Clock } from '../kit/clock.js';
import type { CompiledApi } from '../catalog/router.js';
import type { Logger } from '../observe/log.js';
import type { ApiConfig } from '../config/schema.js';
import { dispatch, redispatch, type DispatchHost } from './dispatch.js';
import { exchangeOf, type Exchange } from './exchange.js';
import { AnswerDrains } from './handlers/drain-after-leave.js';
import { spokeNoHttp2 } from './http2-upstream.js';
import { Origins, type Origin, type OriginUse } from './origins.js';
import { HealthChecks } from './health-checks.js';
import { isTargetFailure, OutlierDetection } from './outlier-detection.js';
import { failureOutcome, timedOut } from './outcomes.js';
import { couldNotConnect, mayGoElsewhere, mayGoElsewhereAfter } from './retries.js';
import { systemResolver, TargetAddresses, type HostResolver } from './target-addresses.js';
import { countFailure, type PoolTarget, type TargetPool } from './target-pool.js';
import { noUpstreamTls, tlsOfTarget, type UpstreamTlsByApi } from './upstream-tls.js';
import type { ApiUpstream } from '../console/logic/upstreams.js';
import type { WebSocketLimits } from './websocket/link.js';
import { openingHeaders, webSocketSteps, type OpeningHost } from './websocket/opening.js';
import type { WebSocketSteps } from './websocket/relay.js';

export { Exchange, exchangeOf, upstreamDrainCapMs } from './exchange.js';
export type { AnswerBodyWatch, ExchangeReports } from './exchange.js';
export type { ProxyOutcome } from './outcomes.js';

export interface UpstreamProxyOptions {
  /**
   * Milliseconds the upstream has to answer once the request (its body included) has been sent, and then
   * between chunks of its answer's body, before 504 (or a closed connection).
   */
  proxyTimeout: number;
  logger: Logger;
  /** Records the time the gateway adds to each exchange. */
  latency?: AddedLatencySink;
  /** Durations and the gRPC deadlines (the system's unless a test moves it). */
  clock?: Clock;
  /** The timers of `upstreamDrainCapMs` and of WebSocket pings (the clock's unless a test moves them). */
  timers?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /** `server.webSocketPingInterval` and `server.webSocketMaxFrame`. */
  webSocket: Omit<WebSocketLimits, 'timers'>;
  /** Answers read after their clients left at once (`upstreamDrainLimit`); 256 unless said. */
  drainLimit?: number;
  /** Told of each of those reads cut to make room for a newer one. */
  onDrainCut?: () => void;
  /** Resolves the host names of the pools' targets (the system's unless a test answers). */
  resolveHost?: HostResolver;
}

/**
 * Streams requests to upstreams over keep-alive connections (one undici pool per upstream origin,
 * origins.ts) and streams the responses back through the handlers each API needs (dispatch.ts), without
 * hop-by-hop fields. Internal details of failures go to the log, never to the client: what happened is
 * reported to the pipeline through the exchange (`ExchangeReports`), which renders it.
 *
 * Each origin has an http-proxy-3 server whose `web()` runs the exchange through its passes, the first
 * of them the gateway's, which sends the prepared request with undici (the HTTP client of Node's own
 * `fetch`), whose dispatcher costs a third of what Node's `http.request` does per exchange (measured
 * side by side, see docs/performance.md): its head is one list of fields written as it is, and the
 * exchange itself is undici's handler, so a request makes no closure.
 */
export class UpstreamProxy implements DispatchHost, OpeningHost, OriginUse {
  /** Milliseconds the upstream has to answer, then between body chunks; a reload changes it for the exchanges that follow. */
  proxyTimeout: number;
  readonly clock: Clock;
  /** The timers of `upstreamDrainCapMs`. */
  readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  readonly logger: Logger;
  /** How each open WebSocket is kept in check. */
  readonly webSocketLimits: WebSocketLimits;
  /** The answers read after their clients left; a reload changes its limit. */
  readonly drains: AnswerDrains<Exchange>;
  readonly webSocketSteps: WebSocketSteps;
  /** The active health checks of the targets of the APIs with a pool. */
  private readonly healthChecks: HealthChecks;
  /** The passive outlier detection of the targets of the APIs with a pool. */
  private readonly outliers: OutlierDetection;
  /** The addresses the host names of the pools' targets resolve to, each a target. */
  private readonly addresses: TargetAddresses;
  /** The APIs of the config in force, whose targets follow their names' addresses. */
  private apis: readonly ApiConfig[] = [];
  private readonly origins: Origins;
  /** The `upstream.tls` of the APIs in force, read (the origins opened from now on use it). */
  private upstreamTls = noUpstreamTls;
  /** The pool and the targets tried of each exchange of an API with a pool, while it runs. */
  private readonly attempts = new WeakMap<Exchange, PooledAttempt>();

  constructor(private readonly options: UpstreamProxyOptions) {
    this.proxyTimeout = options.proxyTimeout;
    this.clock = options.clock ?? systemClock;
    this.timers = options.timers ?? this.clock;
    this.logger = options.logger;
    this.webSocketLimits = { ...options.webSocket, timers: this.timers };
    this.drains = new AnswerDrains(options.drainLimit ?? 256, options.onDrainCut);
    this.webSocketSteps = webSocketSteps(this);
    this.healthChecks = new HealthChecks(this.timers, this.logger);
    this.outliers = new OutlierDetection(this.timers, this.logger);
    this.addresses = new TargetAddresses(
      options.resolveHost ?? systemResolver,
      this.timers,
      this.logger,
      () => this.addressesChanged(),
    );
    this.origins = new Origins(
      this,
      () => this.proxyTimeout,
      this.timers,
      (api, origin) => this.healthChecks.stateOf(api, origin),
      (api, origin) => this.outliers.standingOf(api, origin),
      (api, origin) => tlsOfTarget(this.upstreamTls, api, origin),
      this.addresses.addressesOf,
    );
  }

  /**
   * Resolves the host names of the targets of `apis` (the config's, at start and at each reload) and
   * checks their health: targets that remain keep what was found of them (their health, and their
   * standing with outlier detection). Connections opened from now on (exchanges, WebSocket openings,
   * checks) are made with `upstreamTls`, their APIs' TLS read from its files; those open that no API
   * uses any more (another upstream, other TLS) close once their exchanges are answered.
   */
  watchTargets(apis: readonly ApiConfig[], upstreamTls: UpstreamTlsByApi = noUpstreamTls): void {
    this.apis = apis;
    this.upstreamTls = upstreamTls;
    this.addresses.watch(apis);
    this.followTargets();
    this.origins.retireUnused(apis);
  }

  /** The targets of `apis` and what this gateway knows of them now (the admin listener, metrics, /readyz). */
  targetStates(apis: readonly ApiConfig[]): ApiUpstream[] {
    return this.origins.states(apis);
  }

  /**
   * Forwards the exchange's request to `api`'s upstream at `exchange.upstreamTarget`, with the fields of
   * `exchange.upstreamFields` and the upstream's Host. The exchange is complete once the client response
   * has closed.
   *
   * A WebSocket opening goes through http-proxy-3's `ws()`, with the upgrade fields too: when the
   * upstream answers 101, its answer goes to the client with the gateway's fields (`exchange.fields`) and
   * its link relays the frames (`exchange.webSocket`); any other answer is relayed as it is, after which
   * the connection closes. Every other request goes through `web()` and undici.
   */
  forward(exchange: Exchange, api: CompiledApi): void {
    const { req, res } = exchange;
    exchange.forwarded = true;
    exchange.forwardedAt = this.clock.monotonic();
    // The one-URL form's origin is found by its API alone, as before pools were.
    const origin = api.upstreamTargets === null ? this.origins.of(api) : this.targetOf(exchange, api);
    if (exchange.isOpening()) {
      // http-proxy-3's ws() takes the opening's path from `req.url` alone: the one place it is rewritten.
      req.url = exchange.upstreamTarget;
      // Its one try is told before its fields are copied: a traced one names its client span in them.
      exchange.tryStarted(origin);
      origin.openWebSocket(req, exchange.upgradeHead!, openingHeaders(exchange, origin.host));
      return;
    }
    exchange.grpc = api.config.protocol === 'grpc';
    if (exchange.expectsContinue) res.writeContinue();
    origin.server.web(req, res);
  }

  /** Stops the health checks and closes the upstream connections; call after the last exchange. */
  async close(): Promise<void> {
    this.addresses.close();
    this.outliers.close();
    await Promise.all([this.healthChecks.close(), this.origins.close()]);
  }

  /** The health checks and the outlier detection of the targets of the APIs in force, each address apart. */
  private followTargets(): void {
    this.healthChecks.watch(this.apis, this.upstreamTls, this.addresses.addressesOf);
    this.outliers.watch(this.apis, this.addresses.addressesOf);
  }

  /** The addresses of a target's name changed: the pools are made again, and their targets checked. */
  private addressesChanged(): void {
    this.origins.addressesChanged();
    this.followTargets();
    this.origins.retireUnused(this.apis);
  }

  /** The origin of the target of `api`'s pool that the exchange goes to, noted on the exchange. */
  private targetOf(exchange: Exchange, api: CompiledApi): Origin {
    const pool = this.origins.poolOf(api);
    const target = pool.pick();
    pool.budget.noteExchange(exchange.forwardedAt);
    exchange.target = target.name;
    exchange.targetsTried = 1;
    // undici's headersTimeout bounds each try on real time, from when its request went out: a deadline
    // on the gateway's timers bounds them all from the forwarding (a request with a body keeps undici's,
    // which runs once the body is sent; a WebSocket opening has its own).
    const deadline =
      exchange.hasBody || exchange.isOpening()
        ? null
        : this.timers.setTimeout(() => this.outOfTime(exchange), this.proxyTimeout);
    this.attempts.set(exchange, { api: api.config.id, pool, tried: [target], deadline });
    return target.origin;
  }

  /** proxyTimeout passed since the exchange was forwarded, and no target's answer came: 504. */
  private outOfTime(exchange: Exchange): void {
    if (exchange.settled || exchange.upstreamMs !== null) return;
    exchange.failUpstream(new errors.HeadersTimeoutError('proxyTimeout passed before any target answered'));
    // One still waiting for a connection is aborted as it gets one (`onRequestStart`).
    exchange.controller?.abort(new Error('proxyTimeout passed'));
  }

  /** The exchange's tries are over (a target's answer came, or it failed for good): its deadline too. */
  private triesOver(attempt: PooledAttempt | undefined): void {
    if (attempt !== undefined && attempt.deadline !== null) this.timers.clearTimeout(attempt.deadline);
  }

  /**
   * The target an exchange of an API with a pool may go to next, with the milliseconds of proxyTimeout
   * left (it bounds the whole exchange): while its API's `retries` are not spent, some time is left, the
   * API's retry budget allows it (when `budgeted`), and a target it has not tried is left; else null.
   */
  private retryTarget(exchange: Exchange, attempt: PooledAttempt, budgeted = true): Retry | null {
    const { pool, tried } = attempt;
    const now = this.clock.monotonic();
    const left = this.proxyTimeout - (now - exchange.forwardedAt);
    if (tried.length > pool.retries || left <= 0 || (budgeted && !pool.budget.withdraw(now))) return null;
    const next = pool.pickOther(tried);
    return next === null ? null : { next, left };
  }

  /** Sends the exchange to `retry.next`, with what is left of proxyTimeout. */
  private sendElsewhere(exchange: Exchange, attempt: PooledAttempt, { next, left }: Retry): void {
    const { tried } = attempt;
    tried.push(next);
    exchange.target = next.name;
    exchange.targetsTried = tried.length;
    exchange.settled = false;
    exchange.controller = null;
    redispatch(exchange, next.origin, left);
  }

  /**
   * Sends a failed exchange of an API with a pool to another target, when it may go again
   * (retries.ts) and `retryTarget` gives one. One whose connection could not be opened is outside the
   * retry budget: nothing of it was sent, so that a killed target's share of a burst is all sent on (the
   * budget keeps a failing fleet from being sent much more than its load; a refused connection sends
   * nothing).
   */
  private triedElsewhere(error: Error, exchange: Exchange, attempt: PooledAttempt): boolean {
    if (!mayGoElsewhere(error, exchange)) return false;
    const retry = this.retryTarget(exchange, attempt, !couldNotConnect(error));
    if (retry === null) return false;
    this.logger.info(
      {
        err: { code: (error as NodeJS.ErrnoException).code },
        target: exchange.target,
        next: retry.next.name,
      },
      'upstream target failed before the request went out: trying another',
    );
    this.sendElsewhere(exchange, attempt, retry);
    return true;
  }

  targetAnswered(exchange: Exchange, controller: Dispatcher.DispatchController, statusCode: number): boolean {
    const attempt = this.attempts.get(exchange)!;
    const target = attempt.tried[attempt.tried.length - 1]!;
    if (statusCode < 500) {
      this.outliers.succeeded(target);
      this.triesOver(attempt);
      return false;
    }
    this.outliers.failed(attempt.api, attempt.pool, target);
    const retry =
      !mayGoElsewhereAfter(statusCode, exchange) || exchange.req.socket.destroyed || exchange.res.destroyed
        ? null
        : this.retryTarget(exchange, attempt);
    if (retry === null) {
      this.triesOver(attempt);
      return false;
    }
    this.logger.info(
      { status: statusCode, target: exchange.target, next: retry.next.name },
      'upstream target answered a gateway error: trying another',
    );
    // The answer is set aside, its connection closed: the error undici tells of it now is not the
    // exchange's (a settled exchange hears none), and no byte of it reaches the client.
    exchange.settled = true;
    exchange.tryEnded('completed', statusCode);
    controller.abort(new Error(`the target answered ${statusCode}: the exchange went to another`));
    exchange.responseHeaders = null;
    this.sendElsewhere(exchange, attempt, retry);
    return true;
  }

  /** The pass that sends the exchange's request upstream (origins.ts). */
  send(req: IncomingMessage, origin: Origin): void {
    const exchange = exchangeOf(req)!;
    dispatch(exchange, origin, this);
    this.options.latency?.request(this.clock.monotonic() - exchange.arrivedAt);
  }

  addedResponse(ms: number): void {
    this.options.latency?.response(ms);
  }

  /**
   * The upstream exchange failed: its outcome is noted and logged, and the pipeline told (502 or 504
   * when nothing was answered yet, else a broken answer).
   */
  fail(error: Error, exchange: Exchange): void {
    const { req, res } = exchange;
    const attempt = exchange.targetsTried > 0 ? this.attempts.get(exchange) : undefined;
    // The client has gone (an HTTP/2 stream reset before Node destroys it has a live socket).
    if (req.socket.destroyed || res.destroyed) {
      this.triesOver(attempt);
      exchange.upstreamOutcome = 'client_aborted';
      return;
    }
    if (attempt !== undefined) {
      countFailure(attempt.tried);
      if (isTargetFailure(error))
        this.outliers.failed(attempt.api, attempt.pool, attempt.tried[attempt.tried.length - 1]!);
      if (this.triedElsewhere(error, exchange, attempt)) return;
      this.triesOver(attempt);
    }
    if (exchange.upstreamOutcome === 'completed')
      exchange.upstreamOutcome = failureOutcome(error, exchange.upstreamMs !== null);
    const notHttp2 = exchange.grpc && spokeNoHttp2(error);
    if (notHttp2) exchange.upstreamOutcome = 'invalid';
    this.logger.warn(
      {
        err: { code: (error as NodeJS.ErrnoException).code, message: error.message },
        outcome: exchange.upstreamOutcome,
        ...(exchange.targetsTried > 0
          ? { targets: this.attempts.get(exchange)?.tried.map(({ name }) => name) }
          : {}),
      },
      notHttp2
        ? 'the upstream of a gRPC API does not speak HTTP/2 (h2c for http://, ALPN h2 for https://)'
        : 'upstream exchange failed',
    );
    exchange.answerFailure(timedOut(error), this.proxyTimeout, this.timers);
  }

  /**
   * The upstream ended a gRPC call (HTTP 200) without a `grpc-status`, in its head or its trailers:
   * its answer breaks gRPC (outcome `invalid`), and the client is given the gateway's status.
   */
  answeredWithoutStatus(exchange: Exchange): void {
    exchange.upstreamOutcome = 'invalid';
    this.logger.warn(
      { outcome: exchange.upstreamOutcome },
      'the upstream ended a gRPC call without a grpc-status',
    );
  }
}

/** An exchange of an API with a pool: the pool, and the targets it was sent to, in order. */
interface PooledAttempt {
  /** Its API's id. */
  readonly api: string;
  readonly pool: TargetPool<Origin>;
  readonly tried: Array<PoolTarget<Origin>>;
  /** The timer of proxyTimeout over all its tries, on the gateway's timers; null for a request with a body. */
  readonly deadline: unknown;
}

/** Where an exchange goes next, and the milliseconds of proxyTimeout it has left. */
interface Retry {
  readonly next: PoolTarget<Origin>;
  readonly left: number;
}
