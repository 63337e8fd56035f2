import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { systemClock, type Clock } from '../kit/clock.js';
import type { ByteMeter } from './byte-meter.js';
import type { AnswerDrains } from './handlers/drain-after-leave.js';
import { InvalidUpstreamResponse, type ProxyOutcome } from './outcomes.js';
import type { WebSocketLink } from './websocket/link.js';

/**
 * Milliseconds the rest of an answer is read for what it costs once its client has gone
 * (`Exchange.readRestOfAnswer`), in all: past it the upstream exchange is aborted, and its units are
 * charged their default (docs/quotas.md).
 */
export const upstreamDrainCapMs = 5 * 60_000;

/** Looks into the upstream's answer as it passes (handlers/body-watch.ts): its head, then each chunk of its body. */
export interface AnswerBodyWatch {
  head(headers: IncomingHttpHeaders): void;
  /** A chunk on its way to the client (or read after the client left): it must not be changed. */
  push(chunk: Buffer): void;
}

/** What an exchange needs of the proxy that runs it (upstream-proxy.ts). */
export interface ExchangeHost {
  /** Durations (`monotonic()`) and the gRPC deadline's timer. */
  readonly clock: Clock;
  /** The timers of `upstreamDrainCapMs`. */
  readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /** The answers read after their clients left. */
  readonly drains: AnswerDrains<Exchange>;
  /** The upstream exchange failed while its client is there: its outcome is set and the pipeline told. */
  fail(error: Error, exchange: Exchange): void;
  /**
   * The target of an exchange of an API with a pool answered `statusCode` (its head came, nothing of it
   * is written yet): true when the answer was set aside and the exchange sent to another target.
   */
  targetAnswered(exchange: Exchange, controller: Dispatcher.DispatchController, statusCode: number): boolean;
  /** The upstream ended a gRPC call without a status: its outcome is `invalid`. */
  answeredWithoutStatus(exchange: Exchange): void;
  /** The time from the upstream response's head to the client response's head handed to Node. */
  addedResponse(ms: number): void;
}

/**
 * The handlers of an API's answers, composed once per API and kind of exchange (dispatch.ts): each
 * function is told its exchange, so that a request makes no handler object of its own.
 */
export interface AnswerChain {
  /** The answer's head (a final status), told at `respondedAt` (`clock.monotonic()`). */
  head(
    exchange: Exchange,
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    respondedAt: number,
  ): void;
  /** A chunk of the answer's body. */
  data(exchange: Exchange, controller: Dispatcher.DispatchController, chunk: Buffer): void;
  /** The answer ended with `trailers` while its client is there: the client's response is ended. */
  end(exchange: Exchange, trailers: IncomingHttpHeaders): void;
}

/**
 * What upstream/ tells the pipeline, and the pipeline renders through its answers: the gateway's record
 * of a request implements these. Each is told only on the way that needs it (a failure, a gRPC call).
 */
export interface ExchangeReports {
  /**
   * The upstream exchange failed while the client is there (`upstreamOutcome` says how): 502, or 504
   * when `timedOut`, when nothing was answered yet, else a broken answer. A gRPC call whose answer has
   * begun is told its status in trailers, and its stream is reset when it has not read them within
   * `unreadMs` on `timers`.
   */
  answerFailure(
    timedOut: boolean,
    unreadMs: number,
    timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
  ): void;
  /** Whether the client reads the answer as a gRPC call (a gRPC content type over HTTP/2). */
  readsGrpc(): boolean;
  /** Whether the request opens a WebSocket: it goes upstream through http-proxy-3's `ws()`. */
  isOpening(): boolean;
  /**
   * The status the client reads of its call: from `grpcStatus` (a `grpc-status` field) of an answer of
   * HTTP 200, else from the HTTP status.
   */
  grpcStatusRead(httpStatus: number, grpcStatus: string | string[] | undefined): void;
  /** The upstream ended a call without a status: the fields of the gateway's status, to end it with. */
  grpcStatusMissing(): readonly string[];
  /** Ends the response with `head` (name, value pairs) in the one HEADERS frame that ends the stream. */
  endTrailersOnly(head: readonly string[]): void;
}

/**
 * Where one try of an exchange goes (an origin): what a client span of it says of its server. Made once
 * per origin, never per request.
 */
export interface TryTarget {
  /** The origin's URL (`http://10.0.0.7:8080`), which the try's path follows. */
  readonly url: string;
  /** Its host name or address (no brackets), and its port. */
  readonly address: string;
  readonly port: number;
}

/**
 * How a try of an exchange ended: its answer read to its end (`completed`), its client gone or the
 * gateway's cut (`client_aborted`), or the error that failed it.
 */
export type TryEnd = 'completed' | 'client_aborted' | Error;

/** Links the request and the response of an exchange to it, for shared listeners. */
const exchangeKey = Symbol('quotagate.exchange');
type Linked<T> = T & { [exchangeKey]?: Exchange };

/** The exchange of a request or response it made. */
export const exchangeOf = (emitter: object): Exchange | undefined => (emitter as Linked<object>)[exchangeKey];

/**
 * One proxied exchange: the client's request and response, and what the exchange did, filled in while it
 * runs; byte counts are body bytes as they streamed through. The gateway's record of a request is an
 * Exchange, so a request is one object however many events it sees: it is undici's handler of the
 * upstream exchange itself, its answer goes through its API's handlers (`chain`), and the listeners on
 * the client's request and response are functions shared by all exchanges that find theirs through the
 * emitter. Read it once the client response has closed, through `outcome()`. Fields below "upstream/
 * only" are the handlers' state: nothing above upstream/ writes them.
 */
export abstract class Exchange<
    Watch extends AnswerBodyWatch = AnswerBodyWatch,
    Meter extends ByteMeter = ByteMeter,
  >
  implements Dispatcher.DispatchHandler, ExchangeReports
{
  /** When the request arrived (`clock.monotonic()`, milliseconds). */
  readonly arrivedAt: number;
  status = 0;
  bytesIn = 0;
  bytesOut = 0;
  /** Body bytes of an answer the gateway made itself (an error), which no byte quota is charged. */
  answeredBytes = 0;
  /** The upstream's response fields (lower-case names), once they came. */
  responseHeaders: IncomingHttpHeaders | null = null;
  /** The upstream's trailer fields (`{}` for none), once its answer has ended: null until it is read to its end. */
  responseTrailers: IncomingHttpHeaders | null = null;
  /** What looks into the answer's body as it passes (what it says it cost), when anything does. */
  bodyWatch: Watch | null = null;
  /** Milliseconds from forwarding until the upstream's response headers arrived; null when none did. */
  upstreamMs: number | null = null;
  /** How the upstream side ended; the client's abort is only known at the end (`outcome()`). */
  upstreamOutcome: ProxyOutcome = 'completed';
  forwardedAt = 0;
  /** Response fields the gateway adds, as name, value pairs; they win over the upstream's. */
  readonly fields: string[] = [];
  /**
   * The upstream request's fields but `Host`, as name, value pairs: the request's end-to-end fields and
   * those the gateway sets. undici writes a list as it is.
   */
  readonly upstreamFields: Array<string | string[]> = [];
  /**
   * The target the upstream is sent (its base path, the routed path and the query): the pipeline sets it
   * when it routes the request, and `req.url` keeps what the client sent.
   */
  upstreamTarget = '';
  /** Whether the request announced a body, which then streams upstream. */
  hasBody = false;
  /** The client waits for `100 Continue` before it sends the body: invited only once it is forwarded. */
  expectsContinue = false;
  /**
   * A byte restriction counts what the exchange moves: a WebSocket opening then offers the upstream no
   * compression (websocket/opening.ts).
   */
  countsBytes = false;
  /** Whether the client takes trailer fields: the upstream's are then relayed after the body. */
  relaysTrailers = false;
  /** Set once the exchange has been handed to the upstream. */
  forwarded = false;
  /**
   * Of an API with a pool of targets: the origin of the target it was sent to last (the one that
   * answered, when one did); null for the one-URL form.
   */
  target: string | null = null;
  /** Of an API with a pool of targets: how many targets it was sent to; 0 for the one-URL form. */
  targetsTried = 0;
  /** The API is a gRPC service: the upstream speaks HTTP/2, and ends its answers with a gRPC status. */
  grpc = false;
  /** Milliseconds from arrival the call may take in all (its `grpc-timeout`), when shorter than proxyTimeout. */
  deadlineMs: number | null = null;
  /**
   * For a request that came through the server's 'upgrade' event: the bytes that followed its head on
   * the connection (the new protocol's, never read as HTTP); null for any other request.
   */
  upgradeHead: Buffer | null = null;
  /** The WebSocket the upstream accepted (it answered 101), open until the client response closes. */
  webSocket: WebSocketLink | null = null;
  /** Bytes charged to its byte restrictions while it ran (on the tick, or as they passed). */
  chargedBytes = 0;
  /** Told of its bytes as they pass, while an enforced byte restriction counts them; else null. */
  meter: Meter | null = null;
  /**
   * The rest of the answer was cut to make room for newer ones (`upstreamDrainLimit`): what it said
   * before the cut is what it says.
   */
  drainCut = false;

  // upstream/ only.
  /** The handlers of its answer, set as it is dispatched. */
  chain: AnswerChain | null = null;
  /** The proxy that runs it, once dispatched. */
  host: ExchangeHost | null = null;
  /** The deadline's timer while it runs (handlers/deadline.ts). */
  deadline: unknown = null;
  /**
   * The head of a gRPC call's trailers-only answer (a head that ended the stream: gRPC over HTTP/2,
   * "Responses"), relayed as one HEADERS frame that ends the client's stream as the upstream's end is told.
   */
  heldHead: string[] | null = null;
  /** Charges its meter waits for: the upstream's answer is paused until none is left. */
  heldForCharges = 0;
  /** The client could not take the last chunk written: the upstream's answer waits for its 'drain'. */
  awaitingDrain = false;
  /** undici's control of the upstream exchange: pause, resume, abort. */
  controller: Dispatcher.DispatchController | null = null;
  /** Ended, one way or another: the upstream has nothing more to say. */
  settled = false;
  /**
   * Set while the rest of the answer is read after the client left (`readRestOfAnswer`): told once,
   * when the answer has ended or cannot be read to its end.
   */
  drained: ((exchange: Exchange) => void) | null = null;
  /** The timer of `upstreamDrainCapMs` while the rest of the answer is read. */
  private drainCap: unknown = null;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    clock: Clock = systemClock,
  ) {
    this.arrivedAt = clock.monotonic();
    (req as Linked<IncomingMessage>)[exchangeKey] = this;
    (res as Linked<ServerResponse>)[exchangeKey] = this;
  }

  abstract answerFailure(
    timedOut: boolean,
    unreadMs: number,
    timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
  ): void;
  abstract readsGrpc(): boolean;
  abstract isOpening(): boolean;
  abstract grpcStatusRead(httpStatus: number, grpcStatus: string | string[] | undefined): void;
  abstract grpcStatusMissing(): readonly string[];
  abstract endTrailersOnly(head: readonly string[]): void;

  /**
   * A try of the exchange is sent to `target` (each target of a pool it goes to is one), its fields
   * ready: whoever traces the exchange starts its client span here. Nothing to do by default.
   */
  tryStarted(_target: TryTarget): void {}

  /**
   * The try last started has ended (`how`), its answer's status `statusCode` when its head came (0 when
   * none did). Told once per try (`settle`, or the pool's answer set aside), and maybe again when the
   * exchange ends: whoever traces it ignores a try already ended.
   */
  tryEnded(_how: TryEnd, _statusCode: number): void {}

  /** Tells `tryEnded` of the try last started, with its answer's status if its head came (else 0). */
  endTry(how: TryEnd): void {
    this.tryEnded(how, this.responseHeaders === null ? 0 : this.status);
  }

  /** How the exchange ended, once the client response has closed. */
  outcome(): ProxyOutcome {
    return this.upstreamOutcome === 'completed' && !this.res.writableFinished && this.webSocket === null
      ? 'client_aborted'
      : this.upstreamOutcome;
  }

  /** Ends the upstream side once the client has gone: an upstream exchange still running is aborted. */
  abandonUpstream(): void {
    if (this.settled || this.res.writableFinished) return;
    this.settle('client_aborted');
    // One still waiting for a connection is aborted as it gets one (`onRequestStart`).
    this.controller?.abort(new Error('the client went away'));
  }

  /**
   * Reads the rest of the upstream's answer once the client has gone, discarding it, so that what it
   * says the exchange cost can be charged: `then` is told once the answer has ended (its trailers are
   * then in `responseTrailers`) or cannot be read to its end (they stay null). Bounded by `proxyTimeout`
   * between chunks (undici's body timeout), by `upstreamDrainCapMs` in all, and by the proxy's
   * `upstreamDrainLimit` of such reads at once (`drainCut` says when that cut it). False, and nothing
   * read, when there is nothing left to read: the answer is over, the request never went upstream, or it
   * is a WebSocket opening (relayed by its link, not read here). Like undici's `interceptor/dump.js`,
   * with the handlers of drain-after-leave.ts.
   */
  readRestOfAnswer(then: (exchange: Exchange) => void): boolean {
    const host = this.host;
    if (this.settled || this.res.writableFinished || host === null || this.upgradeHead !== null) return false;
    this.drained = then;
    this.drainCap = host.timers.setTimeout(() => this.giveUpReading(), upstreamDrainCapMs);
    // Paused while the client could not take more: nothing is written from now on.
    this.controller?.resume();
    host.drains.add(this);
    return true;
  }

  /**
   * Too many answers are read after their clients left (`AnswerDrains`), and this is the oldest: the
   * upstream exchange is aborted, and what the answer said so far is what it says (`drainCut`).
   */
  cutReading(): void {
    this.drainCut = true;
    const error = new Error('too many answers read after their clients left');
    this.settle(error);
    this.controller?.abort(error);
  }

  /** The rest of the answer took longer than `upstreamDrainCapMs`: the upstream exchange is aborted. */
  private giveUpReading(): void {
    this.drainCap = null;
    const error = new Error('the rest of the answer took too long to read');
    this.settle(error);
    this.controller?.abort(error);
  }

  /**
   * The upstream has nothing more to say (`how`): its try has ended, its deadline, if any, is of no use
   * now, and the reading of the rest of its answer, if any, is told.
   */
  settle(how: TryEnd): void {
    this.settled = true;
    this.endTry(how);
    if (this.deadline !== null) this.host!.clock.clearTimeout(this.deadline);
    const then = this.drained;
    if (then === null) return;
    this.drained = null;
    if (this.drainCap !== null) this.host!.timers.clearTimeout(this.drainCap);
    this.host!.drains.delete(this);
    then(this);
  }

  /** Ends the upstream side for `error`: the client is told of it, unless only the rest was being read. */
  failUpstream(error: Error): void {
    const reading = this.drained !== null;
    this.settle(error);
    if (!reading) this.host?.fail(error, this);
  }

  /** The client is ready for more: the upstream may send again, unless a charge holds it. */
  resumeUpstream(): void {
    this.awaitingDrain = false;
    if (this.heldForCharges === 0) this.controller?.resume();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // The deadline passed, or the client left, while the connection was being made.
    if (this.settled) controller.abort(new Error('the exchange ended before it started'));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    // 1xx answers are the upstream's to the connection (undici refuses an unasked 100 or 101 itself).
    if (statusCode >= 100 && statusCode < 200) return;
    const respondedAt = this.host!.clock.monotonic();
    if (statusCode < 100) {
      this.failUpstream(new InvalidUpstreamResponse(`upstream answered status ${statusCode}`));
      controller.abort(new Error('invalid upstream answer'));
      return;
    }
    this.responseHeaders = headers;
    this.chain!.head(this, controller, statusCode, headers, respondedAt);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.chain!.data(this, controller, chunk);
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.responseTrailers = trailers;
    const reading = this.drained !== null;
    this.settle('completed');
    if (!reading) this.chain!.end(this, trailers);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (!this.settled) this.failUpstream(error);
  }
}
