import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { AccessLog } from '../observe/access-log.js';
import type { AuthRefusalReason, AuthResult, Principal } from '../auth/authenticator.js';
import { normalizeTarget } from '../kit/normalize-path.js';
import { systemClock, type Clock } from '../kit/clock.js';
import type { RouteMatch } from '../catalog/router.js';
import type { DataPlane } from './rule-set.js';
import { grpcStatusGiven, isGrpcCall } from './answers/grpc.js';
import { sendJson } from './answers/json.js';
import { authRefusalDetails, dataPlaneErrors, sendError, type DataPlaneErrorCode } from './answers/errors.js';
import type { Logger } from '../observe/log.js';
import type { Metrics } from '../observe/metrics.js';
import { appendForwardedFields, clientAddress, notePeer, peerAddress } from '../upstream/fields/forwarded.js';
import { callerOf, countedFields, repeatedCallerField } from '../upstream/fields/caller-keys.js';
import { CallerBook } from '../quota/caller-book.js';
import { grpcTimeoutMs } from '../upstream/grpc-timeout.js';
import { appendEndToEndRequestFields, takesTrailers } from '../upstream/fields/hop-by-hop.js';
import { Exchange, exchangeOf, type ProxyOutcome, type UpstreamProxy } from '../upstream/upstream-proxy.js';
import { cutMessages, cutResponse, type ExchangeCut } from './answers/cut.js';
import {
  answerUpstreamFailure,
  missingGrpcStatus,
  noteUpstreamGrpcStatus,
  relayTrailersOnly,
} from './answers/upstream-reports.js';
import type {
  CounterAddition,
  CounterRef,
  CounterSpec,
  CounterState,
  SlotRelease,
} from '../limiter/counter-store.js';
import type { Limiter, LimiterVerdict } from '../limiter/limiter.js';
import { appendRateLimitFields } from './rate-limit-headers.js';
import type {
  ApplicableRestriction,
  CallerRestriction,
  QuotaIndex,
  QuotaChecks,
} from '../quota/quota-index.js';
import { onCallerCounters } from '../quota/quota-index.js';
import { requestIdOf } from './request-id.js';
import { announcesBody, screeningProblem } from './request-screening.js';
import {
  additionsOf,
  OpenExchanges,
  type MeteredBytes,
  type OpenExchange,
  type QuotaOutcome,
} from './open-exchanges.js';
import { asksForWebSocket, responseOnSocket, upgradeProblem } from './edge/websocket-handshake.js';
import { readings, tightest, UsageBudget } from './usage-endpoint.js';
import { AnswerBodyUnits, askForIdentity } from './answer-units.js';

export interface GatewayParts {
  /** The catalog, authenticator and header rules to start with; `swap` replaces them. */
  dataPlane: DataPlane;
  proxy: UpstreamProxy;
  /** The quota definitions as compiled now; they change while the gateway runs. */
  quotas: () => QuotaIndex;
  limiter: Limiter;
  logger: Logger;
  /** Where the access lines go; null when the log level leaves them out. */
  accessLog: AccessLog | null;
  metrics: Metrics;
  /** The clock of the usage path's budgets (the system's unless a test moves it). */
  now?: () => number;
  /** The timers of the open exchanges' tick and of a shutdown's grace period (tests move them). */
  timers?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
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
}

/**
 * One request through the pipeline: the exchange with the upstream, and what each step decided, for the
 * access log and the metrics. The only object the gateway makes per request.
 */
class RequestRecord extends Exchange<AnswerBodyUnits, MeteredBytes> implements OpenExchange {
  /** The catalog, authenticator and header rules in force when the request came: it keeps them. */
  plane: DataPlane;
  route: RouteMatch | null = null;
  principal: Principal | null = null;
  /** The auth plugin declined to validate the URL, so the request went on unauthenticated. */
  unvalidated = false;
  /** How the quota check ended, for the access log. */
  quota: QuotaOutcome | null = null;
  /**
   * The restrictions that refused it, or that would have (shadow), `<quota id>/<index>` as RateLimit
   * names them, for the access log.
   */
  refusedBy: string | null = null;
  /** The byte restrictions that admitted it: charged with what the exchange moved beyond the declared body. */
  byteCounters: readonly ApplicableRestriction[] = noRestrictions;
  /** The states its admission left its enforced byte counters in: the rooms it starts from. */
  byteStates: ReadonlyArray<CounterState | undefined> = noStates;
  /** The throttleunits restrictions that admitted it: charged what the upstream's answer says it cost. */
  unitCounters: readonly ApplicableRestriction[] = noRestrictions;
  declaredBytes = 0;
  /** The header fields its quotas count it by: no other spelling of them goes upstream. */
  countedFields: readonly string[] = noFields;
  /** Why the gateway refused it, when its answer says so, for the access log. */
  reason: AuthRefusalReason | null = null;
  /** The concurrency slots it holds while in flight, and where each was taken. */
  private slots: Array<{ by: SlotRelease; keys: readonly string[] }> | null = null;
  /** Its exchange has ended (`Gateway.account`): a slot taken from now on is freed at once. */
  private ended = false;
  /** A WebSocket opening handshake (it came through the 'upgrade' event and asks for `websocket`). */
  opensWebSocket = false;
  /** Its neighbours on the gateway's list of open exchanges, while it is forwarded and not yet ended. */
  previousOpen: OpenExchange | null = null;
  nextOpen: OpenExchange | null = null;
  /** Why the gateway ended it while it ran (not a WebSocket: its link says), for the access log. */
  cutBy: ExchangeCut | null = null;

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    readonly id: string,
    /** The client waits for `100 Continue` before it sends the body: sent only once the request is admitted. */
    readonly expectsContinue: boolean,
    plane: DataPlane,
  ) {
    super(req, res);
    this.plane = plane;
    this.fields.push('x-request-id', id);
  }

  /** Holds slots until the request ends; a verdict that came after the client left frees them at once. */
  holdSlots(by: SlotRelease | undefined, keys: readonly string[]): void {
    if (!by || keys.length === 0) return;
    if (this.ended) by.release(keys);
    else (this.slots ??= []).push({ by, keys });
  }

  /** The request has ended: its slots are free from now on. */
  end(): void {
    this.ended = true;
    if (this.slots === null) return;
    for (const { by, keys } of this.slots) by.release(keys);
    this.slots = null;
  }

  /**
   * Request bytes beyond those declared (and charged up front), and every response byte, less what was
   * charged while it ran; of a WebSocket, its frame bytes each way.
   */
  unchargedBytes(): number {
    return Math.max(0, this.bytesIn - this.declaredBytes) + this.bytesOut - this.chargedBytes;
  }

  /**
   * Its request authenticated again, by the authenticator it came under (a reload does not change it),
   * with the path that was routed as the first time (the upstream's has long been sent).
   */
  authenticateAgain(): AuthResult | Promise<AuthResult> {
    this.req.url = this.route!.path;
    return this.plane.authenticator.authenticate(this.req, this.res);
  }

  /** An exchange the gateway cut is the gateway's doing, not the client's abort. */
  override outcome(): ProxyOutcome {
    return this.cutBy === null ? super.outcome() : this.upstreamOutcome;
  }

  running(): boolean {
    if (this.opensWebSocket) return this.webSocket !== null && this.webSocket.endedBy === null;
    return this.cutBy === null && !this.res.writableEnded && !this.res.destroyed;
  }

  /**
   * Ends the exchange while it runs: a WebSocket with a close frame (1008, policy violation: RFC 6455
   * §7.4.1), any other with its upstream side aborted and its response ended in its form (`cutResponse`).
   */
  cut(why: ExchangeCut): void {
    if (this.webSocket) {
      this.webSocket.end(1008, cutMessages[why], why);
      return;
    }
    this.cutBy = why;
    this.abandonUpstream();
    this.answeredBytes += cutResponse(this.res, why, this.fields);
  }

  // What upstream/ reports of the exchange (`ExchangeReports`), rendered through the answers.
  answerFailure(
    timedOut: boolean,
    unreadMs: number,
    timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
  ): void {
    answerUpstreamFailure(this, timedOut, unreadMs, timers);
  }

  readsGrpc(): boolean {
    return isGrpcCall(this.req);
  }

  grpcStatusRead(httpStatus: number, grpcStatus: string | string[] | undefined): void {
    noteUpstreamGrpcStatus(this, httpStatus, grpcStatus);
  }

  grpcStatusMissing(): readonly string[] {
    return missingGrpcStatus(this);
  }

  endTrailersOnly(head: readonly string[]): void {
    relayTrailersOnly(this, head);
  }

  /** Names a restriction that refused the request, or would have, for the access line's `refusedBy`. */
  addRefusal(restriction: ApplicableRestriction): void {
    const name = `${restriction.quotaId}/${restriction.index}`;
    this.refusedBy = this.refusedBy === null ? name : `${this.refusedBy},${name}`;
  }
}

const isPromise = <T>(value: T | Promise<T>): value is Promise<T> => value instanceof Promise;

const noRestrictions: readonly ApplicableRestriction[] = [];
const noStates: readonly CounterState[] = [];
const noFields: readonly string[] = [];
const grpcOverHttp2Only = 'a gRPC API is called over HTTP/2 (h2c or TLS with ALPN h2)';
const malformedGrpcTimeout = 'grpc-timeout must be 1 to 8 digits and a unit (H, M, S, m, u or n)';
/**
 * The access line's status of a request whose client left before any answer was sent to it: none was,
 * and nginx's "client closed request" is what log readers know it by.
 */
const clientLeftStatus = 499;
/** The verdict on a request that only shadow restrictions apply to. */
const nothingToCheck: LimiterVerdict = { allowed: true, retryAfterMs: 0, states: [] };

/**
 * The per-request pipeline of the data plane, as the steps of DESIGN.md's "One proxied request": identify
 * (request id), route (normalize the path, match the catalog), authenticate, select the restrictions
 * (the quota checks of api, method, verb and application), check them (the limiter), forward; then, once
 * the response has closed, account (the byte charge, one access-log line, the metrics). Work that can
 * finish at once does: no promise is awaited that is not pending, and a request is one object whose
 * listeners are shared by all requests.
 */
export class Gateway {
  private inFlight = 0;
  private draining = false;
  private idleWaiters: Array<() => void> = [];
  private plane: DataPlane;
  /** Access lines of 429 answers so far, for `accessLog.sample429`. */
  private rejectedLines = 0;
  /** The usage path's read budget of each caller (kept across reloads). */
  private readonly usageBudget = new UsageBudget();
  /**
   * The callers each restriction counted by caller counts apart, per application: bounded, never evicting
   * (see CallerBook).
   */
  private readonly callers = new CallerBook(() => (this.parts.now ?? Date.now)());
  /** The exchanges forwarded and not yet ended, charged and checked once a second. */
  private readonly openExchanges: OpenExchanges;

  constructor(private readonly parts: GatewayParts) {
    this.plane = parts.dataPlane;
    this.openExchanges = new OpenExchanges({
      timers: parts.timers ?? systemClock,
      now: parts.credentialsNow ?? systemClock.now,
      limiter: parts.limiter,
      logger: parts.logger,
      ...(parts.credentialsGeneration ? { credentialsGeneration: parts.credentialsGeneration } : {}),
      ...(parts.liveGateways ? { liveGateways: parts.liveGateways } : {}),
    });
  }

  /** The data plane new requests start on. */
  get dataPlane(): DataPlane {
    return this.plane;
  }

  /**
   * Puts a reloaded data plane in force for the requests that come from now on; those in flight finish
   * on the one they started on, which then closes.
   */
  swap(next: DataPlane): void {
    const previous = this.plane;
    this.plane = next;
    previous.retire();
  }

  /** The `request` listener of the data-plane servers. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.identify(req, res, false);
  };

  /**
   * The `checkContinue` listener of the data-plane servers (Node emits it for `Expect: 100-continue`):
   * Node would otherwise answer `100 Continue` at once, inviting the body of a request that is not yet
   * authenticated.
   */
  readonly handleExpectingContinue = (req: IncomingMessage, res: ServerResponse): void => {
    this.identify(req, res, true);
  };

  /**
   * The `upgrade` listener of the data-plane servers (Node emits it for `Connection: upgrade`): the
   * request goes through the pipeline as any other, its answer written on its socket; an admitted
   * WebSocket opening goes upstream through http-proxy-3's `ws()`.
   */
  readonly handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    this.identify(req, responseOnSocket(req, socket as Socket), false, head);
  };

  /** The 'close' listener of every response: `this` is the response, linked to its record. */
  private readonly responseClosed = ((gateway: Gateway) =>
    function (this: ServerResponse): void {
      gateway.account(exchangeOf(this) as RequestRecord);
    })(this);

  /**
   * Step 1: the request id, and the record that follows the request to its access-log line.
   * @param head for a request that came through the 'upgrade' event, the bytes that followed its head
   */
  private identify(
    req: IncomingMessage,
    res: ServerResponse,
    waitsForContinue: boolean,
    head: Buffer | null = null,
  ): void {
    notePeer(req);
    const record = new RequestRecord(req, res, requestIdOf(req), waitsForContinue, this.plane);
    record.plane.enter();
    this.inFlight += 1;
    res.on('close', this.responseClosed);
    // An upgrade request's connection closes after any answer but a 101, which must not say so.
    if (this.draining && head === null) record.fields.push('connection', 'close');
    if (head !== null) {
      record.upgradeHead = head;
      record.opensWebSocket = asksForWebSocket(req);
    }
    try {
      const pending = this.route(record);
      if (pending) pending.catch((error: unknown) => this.failed(record, error));
    } catch (error) {
      this.failed(record, error);
    }
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
      if (!(exchange instanceof RequestRecord) || !exchange.opensWebSocket) continue;
      if (exchange.webSocket) exchange.webSocket.end(1001, 'gateway shutting down', 'shutdown');
      else exchange.req.socket.destroy();
    }
  }

  /**
   * Resolves true when no request is in flight (nor an answer still read for its units after its client
   * left), or false when `timeoutMs` passes first.
   */
  waitForIdle(timeoutMs: number): Promise<boolean> {
    if (this.inFlight === 0) return Promise.resolve(true);
    const timers = this.parts.timers ?? systemClock;
    return new Promise((resolve) => {
      const timer = timers.setTimeout(() => resolve(false), timeoutMs);
      this.idleWaiters.push(() => {
        timers.clearTimeout(timer);
        resolve(true);
      });
    });
  }

  private failed(record: RequestRecord, error: unknown): void {
    this.parts.logger.error({ err: error, requestId: record.id }, 'request pipeline failed');
    this.refuse(record, 'internal_error');
  }

  /**
   * Answers an error instead of forwarding. A body the client announced has not been read: the
   * connection closes after the answer rather than read it, or take its first bytes for the next request
   * when a client that waited for `100 Continue` sends no body.
   */
  private refuse(
    record: RequestRecord,
    code: DataPlaneErrorCode,
    extra: readonly string[] = [],
    detail?: string,
  ): void {
    const closing =
      announcesBody(record.req) && !record.fields.includes('connection') ? ['connection', 'close'] : [];
    // The access line and the metrics keep the HTTP status, whichever form (a gRPC status) answered it.
    if (!record.res.headersSent) record.status = dataPlaneErrors[code].status;
    record.answeredBytes += sendError(record.res, code, [...record.fields, ...extra, ...closing], detail);
  }

  /** Step 2: screens, normalizes and routes; then authenticates. A promise only when authentication waits. */
  private route(record: RequestRecord): Promise<void> | void {
    const { req } = record;
    const target = normalizeTarget(req.url ?? '', req.headers.host);
    const problem = target.ok ? screeningProblem(req, target.query) : target.reason;
    if (!target.ok || problem) {
      this.parts.logger.debug({ requestId: record.id, reason: problem }, 'request refused before routing');
      return this.refuse(record, 'bad_request');
    }
    if (record.upgradeHead !== null) {
      const refusal = upgradeProblem(req, record.opensWebSocket);
      if (refusal) return this.refuse(record, 'bad_request', refusal.fields, refusal.detail);
    }
    const { usage } = record.plane;
    if (usage?.is(target.segments)) {
      // As for a routed request, authentication (a plugin's matchURL) sees the path it reached.
      req.url = usage.path + target.query;
      return this.usageRead(record);
    }
    const route = record.plane.router.match(
      req.method ?? 'GET',
      target.segments,
      target.trailingSlash,
      target.query,
    );
    if (!route) return this.refuse(record, 'not_found');
    record.route = route;
    // gRPC runs over HTTP/2 alone: an HTTP/1.1 request to a gRPC API, a WebSocket upgrade among them, is
    // refused before anything goes upstream (RFC 9110 §15.6.6: the major version is refused).
    if (route.api.config.protocol === 'grpc' && req.httpVersionMajor < 2)
      return this.refuse(record, 'http_version_not_supported', [], grpcOverHttp2Only);
    if (!route.method && !route.api.config.passUndeclared) {
      // Only declared operations are exposed: another path is 404, another verb of a declared path 405.
      const allowed = record.plane.router.allowedVerbs(route);
      return allowed.length === 0
        ? this.refuse(record, 'not_found')
        : this.refuse(record, 'method_not_allowed', ['allow', allowed.join(', ')]);
    }
    if (route.api.config.protocol === 'grpc') {
      const deadlineMs = grpcTimeoutMs(req.headers['grpc-timeout']);
      if (Number.isNaN(deadlineMs)) return this.refuse(record, 'bad_request', [], malformedGrpcTimeout);
      if (deadlineMs !== null && deadlineMs < this.parts.proxy.proxyTimeout) record.deadlineMs = deadlineMs;
    }
    if (record.opensWebSocket && !route.api.config.websocket)
      return this.refuse(record, 'bad_request', [], 'this API takes no WebSocket upgrades');
    // Authentication (an auth plugin's matchURL among it) sees the path that was routed and goes upstream.
    req.url = route.path;
    return this.authenticate(record);
  }

  /**
   * The usage path instead of steps 3 to 6: authenticated as any request, then the caller's own
   * restrictions read from their counters, nothing charged, within the caller's read budget.
   */
  private usageRead(record: RequestRecord): Promise<void> | void {
    const verb = record.req.method;
    if (verb !== 'GET' && verb !== 'HEAD')
      return this.refuse(record, 'method_not_allowed', ['allow', 'GET, HEAD']);
    const auth = record.plane.authenticator.authenticate(record.req, record.res);
    if (isPromise(auth)) return auth.then((result) => this.answerUsage(record, result));
    return this.answerUsage(record, auth);
  }

  private async answerUsage(record: RequestRecord, auth: AuthResult): Promise<void> {
    const { req, res, plane } = record;
    if (res.headersSent || res.writableEnded) return;
    if (!auth.ok) return this.refuseUnauthenticated(record, auth);
    record.principal = auth.principal;
    const application = auth.principal?.application;
    const caller = application ?? `client ${clientAddress(req, plane.trustedPeers)}`;
    const waitMs = this.usageBudget.take(caller, (this.parts.now ?? Date.now)());
    if (waitMs > 0)
      return this.refuse(record, 'quota_exceeded', ['retry-after', String(Math.ceil(waitMs / 1000))]);
    // The caller's own counts of restrictions counted by caller, as its next request would be counted.
    const own = this.parts.quotas().restrictionsFor(application);
    const repeated = repeatedCallerField(req, own);
    if (repeated !== undefined) return this.refuseRepeatedCallerField(record, repeated);
    const restrictions = onCallerCounters(own, (restriction) =>
      this.callers.countedAs(restriction.counterKey, application, this.callerIn(record, restriction)),
    );
    let states;
    try {
      states = await this.parts.limiter.peek(counterRefs(restrictions));
    } catch (error) {
      this.parts.logger.warn(
        { err: { message: (error as Error).message } },
        'cannot read usage from the store',
      );
      return this.refuse(record, 'service_unavailable');
    }
    if (res.destroyed) return;
    const body = JSON.stringify({
      application:
        application === undefined ? null : { id: application, name: plane.applications.nameOf(application) },
      restrictions: readings(restrictions, states, plane.catalogNames),
    });
    // A body the client announced is never read: the connection closes rather than parse it as a request.
    const fields = [...record.fields];
    if (announcesBody(req) && !fields.includes('connection')) fields.push('connection', 'close');
    const at = tightest(restrictions, states);
    if (at !== -1) appendRateLimitFields(fields, [restrictions[at]!], [states[at]!]);
    record.answeredBytes += sendJson(res, 200, fields, body);
  }

  /** The caller of `record` under a restriction counted by caller, within its application. */
  private callerIn(record: RequestRecord, restriction: CallerRestriction): string {
    return `${restriction.callerScope}\n${callerOf(record.req, restriction.by, record.plane.trustedPeers)}`;
  }

  /** Answers a request its scheme refused: 401 with the scheme's challenge and reason, or what else it said. */
  private refuseUnauthenticated(record: RequestRecord, auth: Extract<AuthResult, { ok: false }>): void {
    const challenge = auth.reject === 'unauthorized' ? auth.challenge : undefined;
    if (auth.reject === 'unauthorized' && auth.reason) record.reason = auth.reason;
    const detail = record.reason ? authRefusalDetails[record.reason] : undefined;
    this.refuse(record, auth.reject, challenge ? ['www-authenticate', challenge] : [], detail);
  }

  /** Step 3: the authenticator of APIKeyAuthType; a promise only when it has to wait. */
  private authenticate(record: RequestRecord): Promise<void> | void {
    const auth = record.plane.authenticator.authenticate(record.req, record.res);
    if (isPromise(auth)) return auth.then((result) => this.authenticated(record, result));
    return this.authenticated(record, auth);
  }

  /** Steps 4 and 5: selects the restrictions and checks them; a promise only when the check waits. */
  private authenticated(record: RequestRecord, auth: AuthResult): Promise<void> | void {
    const { req, res } = record;
    if (res.headersSent || res.writableEnded) return;
    if (!auth.ok) return this.refuseUnauthenticated(record, auth);
    record.principal = auth.principal;
    record.unvalidated = auth.unvalidated === true;

    const route = record.route!;
    const verb = req.method ?? 'GET';
    const selected = this.parts
      .quotas()
      .checksFor(
        route.api.config.id,
        route.method?.id ?? null,
        verb === 'HEAD' ? 'GET' : verb,
        auth.principal?.application,
      );
    const repeated = selected.byCaller ? repeatedCallerField(req, selected.all) : undefined;
    if (repeated !== undefined) return this.refuseRepeatedCallerField(record, repeated);
    if (selected.byCaller) record.countedFields = countedFields(selected.all);
    const checks = selected.byCaller
      ? selected.forCaller((restriction) =>
          this.callers.counted(
            restriction.counterKey,
            auth.principal?.application,
            this.callerIn(record, restriction),
            restriction.windowMs,
          ),
        )
      : selected;
    if (checks.all.length === 0) return this.forward(record);
    record.declaredBytes = declaredLength(req);
    // A body larger than a whole window's bytes can never fit: no Retry-After would help.
    if (record.declaredBytes > checks.largestBody) return this.refuseTooLarge(record, checks);
    const specs = checks.specs(record.declaredBytes);
    const verdict = specs.length === 0 ? nothingToCheck : this.parts.limiter.consume(specs);
    if (isPromise(verdict)) {
      return verdict.then((settled) => {
        if (this.admitted(record, checks, specs, settled)) return this.shadowsThenForward(record, checks);
      });
    }
    if (this.admitted(record, checks, specs, verdict)) return this.shadowsThenForward(record, checks);
  }

  /** Answers 400 to a request that names no one caller: it sends a field a quota counts by twice or more. */
  private refuseRepeatedCallerField(record: RequestRecord, field: string): void {
    const detail = `the ${field} field is sent more than once: a quota counts each of its values apart`;
    this.refuse(record, 'bad_request', [], detail);
  }

  /**
   * Answers 413 to a declared body larger than the whole window of a byte restriction: with the RateLimit
   * fields of every restriction it is too large for, read from their counters without charging them
   * (none when the store cannot be read), and a message that names the smallest.
   */
  private async refuseTooLarge(record: RequestRecord, checks: QuotaChecks): Promise<void> {
    const declared = record.declaredBytes;
    // Each restriction by its own limit, twins included (they share a counter under the tightest limit).
    const tooSmall = checks.restrictions.filter(
      (restriction) => restriction.type === 'throttlemb' && restriction.limit < declared,
    );
    const fields: string[] = [];
    try {
      appendRateLimitFields(fields, tooSmall, await this.parts.limiter.peek(counterRefs(tooSmall)));
    } catch (error) {
      this.parts.logger.debug(
        { err: { message: (error as Error).message }, requestId: record.id },
        'cannot read the counters of a body too large from the store',
      );
    }
    if (record.res.destroyed) return;
    const smallest = tooSmall.reduce((least, restriction) =>
      restriction.limit < least.limit ? restriction : least,
    );
    const seconds = Math.ceil(smallest.windowMs / 1000);
    this.refuse(
      record,
      'payload_too_large',
      fields,
      `a body of ${declared} bytes is more than restriction ${smallest.quotaId}/${smallest.index} allows in any ${seconds} seconds (${smallest.limit} bytes)`,
    );
  }

  /** Step 5b, for an admitted request: its shadow restrictions count it, then it goes upstream. */
  private shadowsThenForward(record: RequestRecord, checks: QuotaChecks): Promise<void> | void {
    if (checks.shadows.length === 0) return this.forward(record);
    // Each on its own: one that would refuse must not keep another from counting what it admits.
    const verdicts = checks
      .shadowChecks(record.declaredBytes)
      .map((check) => this.parts.limiter.consume(check));
    if (verdicts.some(isPromise)) {
      return Promise.all(verdicts).then((settled) => {
        this.shadowed(record, checks, settled);
        this.forward(record);
      });
    }
    this.shadowed(record, checks, verdicts as LimiterVerdict[]);
    this.forward(record);
  }

  /**
   * Applies the verdicts of the shadow restrictions: what one would have refused is logged and counted,
   * and the request goes on all the same. A store that cannot decide leaves a shadow restriction silent;
   * one whose counter found no room under the memory bound is counted as such.
   */
  private shadowed(record: RequestRecord, checks: QuotaChecks, verdicts: readonly LimiterVerdict[]): void {
    for (let i = 0; i < verdicts.length; i += 1) {
      const verdict = verdicts[i]!;
      const restriction = checks.shadows[i]!;
      if (verdict === 'unavailable') continue;
      if (verdict.outOfRoom) {
        this.parts.metrics.shadowUncounted(restriction);
        continue;
      }
      if (verdict.allowed) {
        if (restriction.type === 'throttlemb') record.byteCounters = [...record.byteCounters, restriction];
        if (restriction.type === 'throttleunits') record.unitCounters = [...record.unitCounters, restriction];
        if (restriction.type === 'concurrency')
          record.holdSlots(verdict.slotsFreedBy, [restriction.counterKey]);
        continue;
      }
      this.parts.metrics.shadowRefusal(restriction);
      record.quota = 'shadow_refused';
      record.addRefusal(restriction);
    }
  }

  /** Applies a counter verdict: adds the rate-limit fields, and answers 429 or 503 itself when it must. */
  private admitted(
    record: RequestRecord,
    checks: QuotaChecks,
    specs: readonly CounterSpec[],
    verdict: LimiterVerdict,
  ): boolean {
    if (verdict === 'unavailable') {
      record.quota = 'unavailable';
      this.refuse(record, 'service_unavailable');
      return false;
    }
    if (verdict.outOfRoom) {
      // This gateway's counters are at their memory bound: a caller without a counter cannot be counted.
      record.quota = 'unavailable';
      const retryAfter = String(Math.ceil(verdict.retryAfterMs / 1000));
      this.refuse(record, 'service_unavailable', ['retry-after', retryAfter]);
      return false;
    }
    const { metrics } = this.parts;
    const { restrictions, counterOf } = checks;
    for (let i = 0; i < restrictions.length; i += 1) {
      const restriction = restrictions[i]!;
      const counter = counterOf[i]!;
      const full = (verdict.states[counter]?.used ?? 0) + specs[counter]!.need > restriction.limit;
      if (verdict.allowed || full) metrics.quotaDecision(restriction, verdict.allowed);
      if (!verdict.allowed && full) record.addRefusal(restriction);
    }
    appendRateLimitFields(record.fields, restrictions, checks.statesOf(verdict.states));
    record.quota = verdict.allowed ? 'allowed' : 'rejected';
    if (verdict.allowed) {
      record.byteCounters = checks.byteRestrictions;
      if (checks.byteRestrictions.length > 0) record.byteStates = checks.byteStatesOf(verdict.states);
      record.unitCounters = checks.unitRestrictions;
      record.holdSlots(verdict.slotsFreedBy, checks.slotKeys);
    }
    if (!verdict.allowed) {
      const retryAfter = String(Math.max(1, Math.ceil(verdict.retryAfterMs / 1000)));
      this.refuse(record, 'quota_exceeded', ['retry-after', retryAfter]);
    }
    return verdict.allowed;
  }

  /** Step 6: hands the request to the upstream proxy, with the upstream head prepared. */
  private forward(record: RequestRecord): void {
    const { res } = record;
    // The client left while auth or the quota check was pending: its request has been logged already.
    if (res.destroyed) return;
    const route = record.route!;
    this.prepareUpstreamHeaders(record);
    if (record.unitCounters.length > 0) record.bodyWatch = AnswerBodyUnits.of(record.unitCounters);
    if (record.bodyWatch !== null) askForIdentity(record.upstreamFields);
    this.openExchanges.add(record);
    if (record.opensWebSocket) {
      this.parts.proxy.forwardUpgrade(record, route.api, route.upstreamTarget);
      return;
    }
    if (record.expectsContinue) res.writeContinue();
    this.parts.proxy.forward(record, route.api, route.upstreamTarget);
  }

  /** The upstream request's fields (the proxy adds its Host), and whether a body follows them. */
  private prepareUpstreamHeaders(record: RequestRecord): void {
    const { req, plane, upstreamFields } = record;
    const peerTrusted = plane.trustedPeers.trusts(peerAddress(req));
    const { headers } = req;
    appendEndToEndRequestFields(
      headers,
      plane.dropped[peerTrusted ? 'trusted' : 'untrusted'],
      plane.owned,
      upstreamFields,
      record.countedFields,
    );
    // RFC 7692: a compressed message crosses in fewer bytes than the upstream inflates. A byte
    // restriction counts what it protects, so the upstream is offered no extension: the frames then
    // carry their payload as it is (docs/quotas.md, "Counting").
    if (record.opensWebSocket && record.byteCounters.length > 0) {
      const offer = upstreamFields.indexOf('sec-websocket-extensions');
      if (offer !== -1) upstreamFields.splice(offer, 2);
    }
    appendForwardedFields(req, upstreamFields, peerTrusted);
    if (record.principal?.upstreamFields) upstreamFields.push(...record.principal.upstreamFields);
    upstreamFields.push('x-request-id', record.id);
    // RFC 9110 §10.1.4: the upstream may send trailers only to a client that takes them.
    if (takesTrailers(req)) {
      record.relaysTrailers = true;
      upstreamFields.push('te', 'trailers');
    }
    record.hasBody = announcesBody(req);
    // A request that declares no body goes with `Content-Length: 0` unless it is a GET or HEAD, as Node
    // frames a request whose end it is told without a body (it would send an empty chunked one).
    const verb = req.method;
    if (!record.hasBody && headers['content-length'] === undefined && verb !== 'GET' && verb !== 'HEAD')
      upstreamFields.push('content-length', '0');
  }

  /**
   * Step 7, once the response has closed (or a WebSocket's socket): frees its concurrency slots, charges
   * the bytes it moved, then logs and counts it. An answer still read for its units after its client left
   * keeps its slots, and is charged its units, until it ends.
   */
  private account(record: RequestRecord): void {
    const elapsedMs = performance.now() - record.arrivedAt;
    // The client left before its answer was whole: the upstream exchange is of no use to anyone, but for
    // what it costs when a throttleunits restriction charges it (its answer is then read to its end).
    const chargedLater = record.unitCounters.length > 0 && record.readRestOfAnswer(this.restOfAnswerRead);
    if (!chargedLater) {
      record.end();
      record.abandonUpstream();
    }
    const { req, res, route } = record;
    // Closed before any answer was sent, or even decided: the client left (nginx logs the same as 499).
    const leftUnanswered = record.status === 0 && !res.headersSent && !res.writableFinished;
    const outcome = record.forwarded ? record.outcome() : leftUnanswered ? 'client_aborted' : null;
    this.openExchanges.delete(record);
    if (record.forwarded && record.byteCounters.length > 0) this.chargeBytes(record);
    // An upstream that failed before its head, while the client waited, was answered by the gateway: no units.
    if (!chargedLater && record.responseHeaders && record.unitCounters.length > 0) this.chargeUnits(record);
    const status = leftUnanswered ? clientLeftStatus : record.status || res.statusCode;
    const { accessLog, metrics } = this.parts;
    if (accessLog && this.sampled(record, status)) {
      const { principal } = record;
      accessLog.write({
        requestId: record.id,
        client: clientAddress(req, record.plane.trustedPeers),
        verb: req.method ?? '',
        path: loggedPath(route?.path ?? req.url ?? ''),
        protocol:
          req.httpVersionMajor === 2 ? 'HTTP/2' : req.httpVersionMinor === 0 ? 'HTTP/1.0' : 'HTTP/1.1',
        api: route?.api.config.name ?? null,
        method: route?.method?.name ?? null,
        application: principal?.application ? record.plane.applications.nameOf(principal.application) : null,
        subject: principal?.subject ?? null,
        unvalidated: record.unvalidated,
        status,
        bytesIn: record.bytesIn,
        bytesOut: record.bytesOut + record.answeredBytes,
        upstreamMs: record.upstreamMs === null ? null : Math.round(record.upstreamMs * 100) / 100,
        outcome,
        quota: record.quota,
        refusedBy: record.refusedBy,
        reason: record.reason,
        ms: Math.round(elapsedMs * 100) / 100,
        sampled: status === 429 ? record.plane.sample429 : 1,
        webSocket: record.webSocket ? (record.webSocket.endedBy ?? 'closed') : null,
        endedBy: record.cutBy,
        grpcStatus: isGrpcCall(req) ? grpcStatusGiven(res) : null,
      });
    }
    const api = route?.api.label ?? 'none';
    const method = route?.method ? route.api.methodLabels.get(route.method.id)! : 'none';
    // A WebSocket's time in the request histogram is its opening's (until the 101), not how long it stayed open.
    const requestMs = record.webSocket
      ? record.forwardedAt - record.arrivedAt + (record.upstreamMs ?? 0)
      : elapsedMs;
    metrics.request(api, method, status, requestMs / 1000);
    if (outcome && outcome !== 'completed' && outcome !== 'client_aborted') {
      metrics.upstreamErrors.inc({ api, outcome });
    }
    record.plane.leave();
    // An answer still read for its units keeps a shutdown waiting, within its grace period.
    if (!chargedLater) this.done();
  }

  /** One request less in flight: a shutdown waiting for none goes on when it was the last. */
  private done(): void {
    this.inFlight -= 1;
    if (this.inFlight === 0) {
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  /**
   * The rest of the answer of a client that left early has been read, or could not be: the upstream's work
   * is over, so its concurrency slots are free, and its units are charged.
   */
  private readonly restOfAnswerRead = (exchange: Exchange): void => {
    const record = exchange as RequestRecord;
    record.end();
    this.chargeUnits(record);
    this.done();
  };

  /** Whether this request's access line is written: every one, but only one of N of 429 answers. */
  private sampled(record: RequestRecord, status: number): boolean {
    if (status !== 429 || record.plane.sample429 === 1) return true;
    this.rejectedLines += 1;
    return this.rejectedLines % record.plane.sample429 === 1 % record.plane.sample429;
  }

  /** What the exchange moved that its byte restrictions were not charged while it ran. */
  private chargeBytes(record: RequestRecord): void {
    const amount = record.unchargedBytes();
    if (amount <= 0) return;
    this.charge(record, additionsOf(record.byteCounters, amount), 'bytes');
  }

  /**
   * What the upstream's answer says the exchange cost, charged to each throttleunits restriction that
   * admitted it (`unitsSaid`); else its default, counted.
   */
  private chargeUnits(record: RequestRecord): void {
    const additions = record.unitCounters.map((restriction) => {
      const said = unitsSaid(record, restriction);
      if (said === null) this.parts.metrics.unitsUnreadable(restriction);
      return {
        key: restriction.counterKey,
        windowMs: restriction.windowMs,
        amount: said ?? restriction.unitDefault,
      };
    });
    this.charge(
      record,
      additions.filter((addition) => addition.amount > 0),
      'units',
    );
  }

  /** Adds measured units to counters, after the answer: a failure is logged, never answered. */
  private charge(record: RequestRecord, additions: CounterAddition[], what: string): void {
    const charged = this.parts.limiter.add(additions);
    if (charged) {
      charged.catch((error: unknown) => {
        this.parts.logger.error({ err: error, requestId: record.id }, `charging measured ${what} failed`);
      });
    }
  }
}

/** The counters of `restrictions`, to read without charging them. */
const counterRefs = (restrictions: readonly ApplicableRestriction[]): CounterRef[] =>
  restrictions.map(({ counterKey, windowMs }) => ({ key: counterKey, windowMs }));

/**
 * What the answer says an exchange cost for `restriction`: the whole number in its trailer, else in its
 * header (the field wins when it holds one); else what its body paths say, when the answer was read to
 * its end, or what they said before the gateway cut its reading to make room for newer ones
 * (`drainCut`: the cut is the gateway's, and a client must not trade what its answers said for
 * `default` by leaving many calls at once); else null.
 */
function unitsSaid(record: RequestRecord, restriction: ApplicableRestriction): number | null {
  const field = restriction.unitHeader;
  const inField =
    field === null ? null : wholeUnits(record.responseTrailers?.[field] ?? record.responseHeaders?.[field]);
  if (inField !== null || restriction.unitBody === null) return inField;
  if (record.responseTrailers !== null) return record.bodyWatch!.unitsAt(restriction.unitBody);
  return record.drainCut ? record.bodyWatch!.unitsAt(restriction.unitBody, false) : null;
}

/** A field's value as whole units: digits alone (at most 15, RFC 8941's integers), once; else null. */
function wholeUnits(value: string | string[] | undefined): number | null {
  if (typeof value !== 'string') return null;
  const text = value.trim();
  return /^\d{1,15}$/.test(text) ? Number(text) : null;
}

/** Paths in the access log: without the query (it may carry tokens), and at most this long. */
const longestLoggedPath = 1_024;
const loggedPath = (target: string): string => {
  const query = target.indexOf('?');
  const path = query === -1 ? target : target.slice(0, query);
  return path.length > longestLoggedPath ? `${path.slice(0, longestLoggedPath)}…` : path;
};

/**
 * The request's declared body length, or 0 when it declares none (chunked). Node has framed the body by
 * the same digits, leading zeros and all; beyond 2^53 the number is approximate, and larger than any
 * limit anyway.
 */
function declaredLength(req: IncomingMessage): number {
  const header = req.headers['content-length'];
  return header !== undefined && /^\d+$/.test(header) ? Number(header) : 0;
}
