import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import { Pool, type Dispatcher } from 'undici';
import type { AddedLatencySink } from '../observe/added-latency.js';
import { systemClock, type Clock } from '../kit/clock.js';
import type { CompiledApi } from '../catalog/router.js';
import {
  cancelCall,
  carriesGrpcStatus,
  clientGrpcStatusOf,
  endTrailersOnly,
  endWithGrpcStatus,
  grpcMessage,
  grpcStatus,
  isGrpcCall,
  noStatusAnswer,
  noteGrpcStatus,
  readGrpcStatus,
  withoutGrpcStatus,
} from '../gateway/answers/grpc.js';
import { sendError } from '../gateway/answers/errors.js';
import type { Logger } from '../observe/log.js';
import {
  announceTrailers,
  appendEndToEndResponseFields,
  endToEndTrailers,
  namedInConnection,
} from './fields/hop-by-hop.js';
import { headEndedStream, Http2Upstream, spokeNoHttp2, type UpstreamDispatcher } from './http2-upstream.js';
import { AnswerDrains } from './answer-drains.js';
import type { ByteMeter } from './byte-meter.js';
import { WebSocketLink, type WebSocketLimits } from './websocket/link.js';
import { followWebSocketOpenings, type WebSocketOpener, type WebSocketSteps } from './websocket/relay.js';

/** How an exchange with the upstream ended. */
export type ProxyOutcome = 'completed' | 'unreachable' | 'timeout' | 'reset' | 'invalid' | 'client_aborted';

/**
 * Milliseconds the rest of an answer is read for what it costs once its client has gone
 * (`Exchange.readRestOfAnswer`), in all: past it the upstream exchange is aborted, and its units are
 * charged their default (docs/quotas.md).
 */
export const upstreamDrainCapMs = 5 * 60_000;

/** Looks into the upstream's answer as it passes: its head, then each chunk of its body. */
export interface AnswerBodyWatch {
  head(headers: IncomingHttpHeaders): void;
  /** A chunk on its way to the client (or read after the client left): it must not be changed. */
  push(chunk: Buffer): void;
}

/** Links the request and the response of an exchange to it, for shared listeners. */
const exchangeKey = Symbol('quotagate.exchange');
type Linked<T> = T & { [exchangeKey]?: Exchange };

/** The upstream answered something no client may be given: a status below 100. */
class InvalidUpstreamResponse extends Error {
  readonly code = 'UPSTREAM_INVALID_RESPONSE';
}

/** A gRPC call's deadline (its `grpc-timeout`) passed before the upstream's answer was whole. */
class DeadlineExceeded extends Error {
  readonly code = 'GRPC_DEADLINE_EXCEEDED';
}

/** The upstream did not answer an upgrade request within `proxyTimeout`. */
class UpgradeTimeout extends Error {
  readonly code = 'UPSTREAM_UPGRADE_TIMEOUT';
}

const timeoutCodes: ReadonlySet<string> = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'GRPC_DEADLINE_EXCEEDED',
  'UPSTREAM_UPGRADE_TIMEOUT',
]);

/**
 * An answer of the upstream that breaks HTTP: a status below 100, a 101 nobody asked for or a 100 nobody
 * waited for (undici calls these a bad upgrade or a bad response), or bytes its parser refuses.
 */
function isInvalidAnswer(error: Error): boolean {
  const { code } = error as NodeJS.ErrnoException;
  return (
    error instanceof InvalidUpstreamResponse ||
    (typeof code === 'string' && code.startsWith('HPE_')) ||
    (code === 'UND_ERR_SOCKET' && /^bad (?:upgrade|response)$/.test(error.message))
  );
}

/**
 * One proxied exchange: the client's request and response, and what the exchange did, filled in while it
 * runs; byte counts are body bytes as they streamed through. The gateway's record of a request is an
 * Exchange, so a request is one object however many events it sees: it is undici's handler of the
 * upstream exchange itself, and the listeners on the client's request and response are functions shared
 * by all exchanges that find theirs through the emitter. Read it once the client response has closed,
 * through `outcome()`.
 */
export class Exchange<Watch extends AnswerBodyWatch = AnswerBodyWatch, Meter extends ByteMeter = ByteMeter>
  implements Dispatcher.DispatchHandler
{
  /** When the request arrived (`performance.now()`, milliseconds). */
  readonly arrivedAt = performance.now();
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
  /** Whether the request announced a body, which then streams upstream. */
  hasBody = false;
  /** Whether the client takes trailer fields: the upstream's are then relayed after the body. */
  relaysTrailers = false;
  /** Set once the exchange has been handed to the upstream. */
  forwarded = false;
  /** The API is a gRPC service: the upstream speaks HTTP/2, and ends its answers with a gRPC status. */
  grpc = false;
  /** Milliseconds from arrival the call may take in all (its `grpc-timeout`), when shorter than proxyTimeout. */
  deadlineMs: number | null = null;
  /** The deadline's timer while it runs. */
  private deadline: NodeJS.Timeout | null = null;
  /**
   * The head of a gRPC call's trailers-only answer (a head that ended the stream: gRPC over HTTP/2,
   * "Responses"), relayed as one HEADERS frame that ends the client's stream as the upstream's end is told.
   */
  private heldHead: Array<string | string[]> | null = null;
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
  /** Charges its meter waits for: the upstream's answer is paused until none is left. */
  private heldForCharges = 0;
  /** The client could not take the last chunk written: the upstream's answer waits for its 'drain'. */
  private awaitingDrain = false;
  /** undici's control of the upstream exchange: pause, resume, abort. */
  private controller: Dispatcher.DispatchController | null = null;
  /** Ended, one way or another: the upstream has nothing more to say. */
  private settled = false;
  /** Where the upstream's failures are told, and the time the gateway adds recorded. */
  private proxy: UpstreamProxy | null = null;
  /**
   * Set while the rest of the answer is read after the client left (`readRestOfAnswer`): told once,
   * when the answer has ended or cannot be read to its end.
   */
  private drained: ((exchange: Exchange) => void) | null = null;
  /** The timer of `upstreamDrainCapMs` while the rest of the answer is read. */
  private drainCap: unknown = null;
  /**
   * The rest of the answer was cut to make room for newer ones (`upstreamDrainLimit`): what it said
   * before the cut is what it says.
   */
  drainCut = false;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
  ) {
    (req as Linked<IncomingMessage>)[exchangeKey] = this;
    (res as Linked<ServerResponse>)[exchangeKey] = this;
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
    this.settle();
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
   * is a WebSocket opening (relayed by its link, not read here).
   */
  readRestOfAnswer(then: (exchange: Exchange) => void): boolean {
    const proxy = this.proxy;
    if (this.settled || this.res.writableFinished || proxy === null || this.upgradeHead !== null)
      return false;
    this.drained = then;
    this.drainCap = proxy.timers.setTimeout(() => this.giveUpReading(), upstreamDrainCapMs);
    // Paused while the client could not take more: nothing is written from now on.
    this.controller?.resume();
    proxy.drains.add(this);
    return true;
  }

  /**
   * Too many answers are read after their clients left (`AnswerDrains`), and this is the oldest: the
   * upstream exchange is aborted, and what the answer said so far is what it says (`drainCut`).
   */
  cutReading(): void {
    this.drainCut = true;
    this.settle();
    this.controller?.abort(new Error('too many answers read after their clients left'));
  }

  /** The rest of the answer took longer than `upstreamDrainCapMs`: the upstream exchange is aborted. */
  private giveUpReading(): void {
    this.drainCap = null;
    this.settle();
    this.controller?.abort(new Error('the rest of the answer took too long to read'));
  }

  /** Starts the upstream exchange on `pool`, and the call's deadline when it has one. */
  dispatch(proxy: UpstreamProxy, pool: UpstreamDispatcher, options: Dispatcher.DispatchOptions): void {
    this.proxy = proxy;
    if (this.deadlineMs !== null) {
      const left = this.deadlineMs - (performance.now() - this.arrivedAt);
      this.deadline = setTimeout(() => this.expire(), Math.max(0, left));
    }
    pool.dispatch(options, this);
  }

  /** The call's deadline passed: the upstream exchange is ended, and the client told so. */
  private expire(): void {
    this.deadline = null;
    if (this.settled) return;
    const reading = this.drained !== null;
    this.settle();
    if (!reading)
      this.proxy?.fail(new DeadlineExceeded(`the call's grpc-timeout of ${this.deadlineMs} ms passed`), this);
    this.controller?.abort(new Error('deadline exceeded'));
  }

  /**
   * The upstream has nothing more to say: its deadline, if any, is of no use now, and the reading of the
   * rest of its answer, if any, is told.
   */
  private settle(): void {
    this.settled = true;
    if (this.deadline) clearTimeout(this.deadline);
    const then = this.drained;
    if (then === null) return;
    this.drained = null;
    if (this.drainCap !== null) this.proxy!.timers.clearTimeout(this.drainCap);
    this.proxy!.drains.delete(this);
    then(this);
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
    const respondedAt = performance.now();
    if (statusCode < 100) {
      const reading = this.drained !== null;
      this.settle();
      if (!reading)
        this.proxy?.fail(new InvalidUpstreamResponse(`upstream answered status ${statusCode}`), this);
      controller.abort(new Error('invalid upstream answer'));
      return;
    }
    this.responseHeaders = headers;
    this.bodyWatch?.head(headers);
    // The client has gone: the answer is only read for what it costs.
    if (this.drained !== null) return;
    const { res } = this;
    this.upstreamMs = respondedAt - this.forwardedAt;
    this.status = statusCode;
    // One writeHead with a flat list, and no setHeader: Node then formats the head in one pass. Only an
    // auth plugin that set fields of its own takes the slower merge, and its fields win too.
    let fields = appendEndToEndResponseFields(
      headers,
      this.fields,
      res.getHeaderNames().length > 0 ? res : null,
    );
    if (this.grpc && statusCode === 200) {
      if (headEndedStream(controller)) {
        this.heldHead = fields;
        return;
      }
      // Messages or trailers follow this head, and the trailers say the call's status, as they do to a
      // client of the upstream itself: a status in the head is no client's to take for it.
      if (carriesGrpcStatus(headers)) fields = withoutGrpcStatus(fields);
    } else if (this.grpc && isGrpcCall(this.req)) {
      // Another HTTP status: the client reads the call's from it, unless trailers say one.
      noteGrpcStatus(res, clientGrpcStatusOf(statusCode));
    }
    if (this.relaysTrailers && headers.trailer !== undefined) announceTrailers(fields, headers.trailer);
    res.writeHead(statusCode, fields);
    // Node sends a head with the first body bytes: an event stream's client learns at once that it is
    // open, not with the first event, which may be long in coming.
    if (isEventStream(headers['content-type'])) res.flushHeaders();
    this.proxy?.addedResponse(performance.now() - respondedAt);
    if (!res.writable) return;
    res.on('drain', resumeUpstream);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.bodyWatch?.push(chunk);
    if (this.drained !== null) return;
    this.bytesOut += chunk.length;
    // The client's backpressure is noted first: a charge that holds the answer resumes it only once
    // the client has drained as well.
    if (!this.res.write(chunk)) this.awaitingDrain = true;
    if (this.meter !== null && !this.meteredFlows(this.meter, controller)) return;
    if (this.awaitingDrain) controller.pause();
  }

  /**
   * Tells the meter of the chunk that passed: false when the answer may not flow on now (the exchange
   * was ended for it, or a charge holds it: the answer is paused until the charge is decided).
   */
  private meteredFlows(meter: Meter, controller: Dispatcher.DispatchController): boolean {
    const flows = meter.moved();
    if (typeof flows === 'boolean') return flows;
    this.heldForCharges += 1;
    controller.pause();
    void flows.then(() => {
      this.heldForCharges -= 1;
      if (this.heldForCharges === 0 && !this.awaitingDrain && !this.settled) controller.resume();
    });
    return false;
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.responseTrailers = trailers;
    const reading = this.drained !== null;
    this.settle();
    if (reading) return;
    const { res } = this;
    // A gRPC call answered 200 ends with its status: the head's of a trailers-only answer, or the
    // trailers'. Without one the upstream broke gRPC, and the client is given the gateway's.
    const call = this.grpc && this.status === 200 && isGrpcCall(this.req);
    const status = this.heldHead ? this.responseHeaders!['grpc-status'] : trailers['grpc-status'];
    const noStatus = call && status === undefined;
    if (noStatus) this.proxy?.answeredWithoutStatus(this);
    else if (call) noteGrpcStatus(res, readGrpcStatus(status));
    if (this.heldHead) {
      const head = this.heldHead as string[];
      endTrailersOnly(res, noStatus ? [...head, ...noStatusFields()] : head);
      if (noStatus) noteGrpcStatus(res, noStatusAnswer.code);
      return;
    }
    let relayed = this.relaysTrailers
      ? endToEndTrailers(trailers, namedInConnection(this.responseHeaders ?? trailers))
      : null;
    if (noStatus) {
      relayed = { ...relayed, ...fieldsObject(noStatusFields()) };
      noteGrpcStatus(res, noStatusAnswer.code);
    }
    if (relayed) res.addTrailers(relayed);
    res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.settled) return;
    const reading = this.drained !== null;
    this.settle();
    if (!reading) this.proxy?.fail(error, this);
  }
}

/** The status fields the gateway gives a call whose upstream ended it without a status. */
const noStatusFields = (): string[] => [
  'grpc-status',
  String(noStatusAnswer.code),
  'grpc-message',
  grpcMessage(noStatusAnswer.message),
];

/** Name, value pairs as an object of fields. */
function fieldsObject(pairs: readonly string[]): OutgoingHttpHeaders {
  const fields: OutgoingHttpHeaders = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) fields[pairs[i]!] = pairs[i + 1]!;
  return fields;
}

/** Whether a Content-Type names an event stream (text/event-stream, the WHATWG HTML standard §9.2). */
const isEventStream = (type: string | undefined): boolean =>
  type !== undefined && type.length >= 17 && type.slice(0, 17).toLowerCase() === 'text/event-stream';

/** The exchange of a request or response it made. */
export const exchangeOf = (emitter: object): Exchange | undefined => (emitter as Linked<object>)[exchangeKey];

/**
 * The most of a request body a meter is told of at once: a read of the body hands on all it has
 * buffered, which may be far more than one read of the socket.
 */
const meteredPieceBytes = 65_536;

/**
 * The request body as undici reads it, counted on the way. undici pulls a chunk only when it has a
 * connection to write it to, so none is read before then (a 'data' listener would start the flow).
 * Under a meter it goes in pieces of at most `meteredPieceBytes`, each told before it is sent: a piece
 * the meter finds no room for is not sent, and the body fails, so that the upstream never takes the
 * bytes before it for a whole body (the exchange has been ended already).
 */
async function* countedBody(exchange: Exchange): AsyncGenerator<Buffer> {
  // A body given up on (cut at its byte restriction, or undici's request failed) is not destroyed:
  // that would destroy an HTTP/1.1 socket, and the answer the gateway gives on it. What is left of it
  // is read and dropped, as Node's HTTP/1.1 server drops it, so that an HTTP/2 stream can end.
  try {
    for await (const chunk of exchange.req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      if (exchange.meter === null) {
        exchange.bytesIn += chunk.length;
        yield chunk;
        continue;
      }
      for (let at = 0; at < chunk.length; at += meteredPieceBytes) {
        const piece = chunk.length <= meteredPieceBytes ? chunk : chunk.subarray(at, at + meteredPieceBytes);
        exchange.bytesIn += piece.length;
        // The exchange may have ended while the piece before was sent: its meter is gone then.
        const flows = exchange.meter?.moved() ?? true;
        if (!(typeof flows === 'boolean' ? flows : await flows))
          throw new Error('the request body passed its byte restriction');
        yield piece;
      }
    }
  } finally {
    exchange.req.resume();
  }
}

/** `fields` (name, value pairs) and `more` as the header object http-proxy-3 writes; repeated names as lists. */
function headersOf(fields: ReadonlyArray<string | string[]>, more: readonly string[]): OutgoingHttpHeaders {
  const headers: Record<string, string | string[]> = {};
  for (const list of [fields, more]) {
    for (let i = 0; i < list.length; i += 2) {
      const name = list[i] as string;
      const value = list[i + 1]!;
      const existing = headers[name];
      headers[name] = existing === undefined ? value : [existing, value].flat();
    }
  }
  return headers;
}

// The listener of every exchange's response, shared: `this` is the response, linked to its exchange.
function resumeUpstream(this: ServerResponse): void {
  exchangeOf(this)?.resumeUpstream();
}

export interface UpstreamProxyOptions {
  /**
   * Milliseconds the upstream has to answer once the request (its body included) has been sent, and then
   * between chunks of its answer's body, before 504 (or a closed connection).
   */
  proxyTimeout: number;
  logger: Logger;
  /** Records the time the gateway adds to each exchange. */
  latency?: AddedLatencySink;
  /** The timers of `upstreamDrainCapMs` and of WebSocket pings (the system's unless a test moves them). */
  timers?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /** `server.webSocketPingInterval` and `server.webSocketMaxFrame`. */
  webSocket: Omit<WebSocketLimits, 'timers'>;
  /** Answers read after their clients left at once (`upstreamDrainLimit`); 256 unless said. */
  drainLimit?: number;
  /** Told of each of those reads cut to make room for a newer one. */
  onDrainCut?: () => void;
}

/** One upstream origin: its http-proxy-3 server, its keep-alive connections, and its Host. */
interface Upstream {
  readonly server: ProxyServer;
  readonly pool: UpstreamDispatcher;
  /** The Host the upstream is sent: its own (http-proxy-3's `changeOrigin`). */
  readonly host: string;
  /** Opens a WebSocket through `server`. */
  readonly openWebSocket: WebSocketOpener;
}

/**
 * Streams requests to upstreams over keep-alive connections (one undici pool per upstream origin) and
 * streams the responses back without hop-by-hop fields. Internal details of failures go to the log, never
 * to the client.
 *
 * Each origin has an http-proxy-3 server whose `web()` runs the exchange through its passes. The gateway
 * has already done what http-proxy-3's own web passes do (framing, X-Forwarded-*, the target path, the
 * Host, hop-by-hop fields; the response is written here, as with `selfHandleResponse`), so its first pass
 * is the gateway's `forward`, which sends the prepared request and halts the pass loop: `deleteLength`,
 * `timeout`, `XHeaders` and `stream` never run. `forward` sends it with undici (the HTTP client of Node's
 * own `fetch`), whose dispatcher costs a third of what Node's `http.request` does per exchange (measured
 * side by side, see docs/performance.md): its head is one list of fields written as it is, and the
 * exchange itself is undici's handler, so a request makes no closure.
 */
export class UpstreamProxy {
  private readonly upstreams = new Map<string, Upstream>();
  /**
   * Each compiled API's upstream, found by the API itself: its key is a string made and hashed again
   * per request otherwise (0.4% of the gateway's busy time in a profile, issue 35). A reload's new APIs
   * find the same upstream through `upstreams`.
   */
  private upstreamOfApi = new WeakMap<CompiledApi, Upstream>();
  /** Milliseconds the upstream has to answer, then between body chunks; a reload changes it for the exchanges that follow. */
  proxyTimeout: number;
  /** The timers of `upstreamDrainCapMs`. */
  readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /** How each open WebSocket is kept in check. */
  private readonly webSocketLimits: WebSocketLimits;
  /** The answers read after their clients left; a reload changes its limit. */
  readonly drains: AnswerDrains<Exchange>;

  constructor(private readonly options: UpstreamProxyOptions) {
    this.proxyTimeout = options.proxyTimeout;
    this.timers = options.timers ?? systemClock;
    this.webSocketLimits = { ...options.webSocket, timers: this.timers };
    this.drains = new AnswerDrains(options.drainLimit ?? 256, options.onDrainCut);
  }

  /**
   * Forwards the exchange's request to `api`'s upstream at `upstreamTarget`, with the fields of
   * `exchange.upstreamFields` and the upstream's Host. The exchange is complete once the client response
   * has closed.
   */
  forward(exchange: Exchange, api: CompiledApi, upstreamTarget: string): void {
    const { req, res } = exchange;
    exchange.forwarded = true;
    exchange.forwardedAt = performance.now();
    exchange.grpc = api.config.protocol === 'grpc';
    req.url = upstreamTarget;
    this.upstreamOf(api).server.web(req, res);
  }

  /**
   * Forwards the exchange's WebSocket opening handshake to `api`'s upstream at `upstreamTarget` through
   * http-proxy-3's `ws()`, with the fields of `exchange.upstreamFields`, the upstream's Host and the
   * upgrade fields. When the upstream answers 101, its answer goes to the client with the gateway's
   * fields (`exchange.fields`) and its link relays the frames (`exchange.webSocket`); any other answer is
   * relayed as it is, after which the connection closes.
   */
  forwardUpgrade(exchange: Exchange, api: CompiledApi, upstreamTarget: string): void {
    const { req } = exchange;
    exchange.forwarded = true;
    exchange.forwardedAt = performance.now();
    const upstream = this.upstreamOf(api);
    req.url = upstreamTarget;
    // The client's fields stay the request's, for the credentials to be checked again while the
    // WebSocket is open.
    const headers = headersOf(exchange.upstreamFields, [
      'host',
      upstream.host,
      'connection',
      'Upgrade',
      'upgrade',
      'websocket',
    ]) as IncomingHttpHeaders;
    upstream.openWebSocket(req, exchange.upgradeHead!, headers);
  }

  /** Closes the upstream connections; call after the last exchange. */
  async close(): Promise<void> {
    const pools = [...this.upstreams.values()].map(({ pool }) => pool.destroy());
    this.upstreams.clear();
    this.upstreamOfApi = new WeakMap();
    await Promise.all(pools);
  }

  /** The time from the upstream response's head to the client response's head handed to Node. */
  addedResponse(ms: number): void {
    this.options.latency?.response(ms);
  }

  /** The pass that sends the exchange's request upstream; it halts http-proxy-3's pass loop. */
  private send(req: IncomingMessage, upstream: Upstream): true {
    const exchange = exchangeOf(req)!;
    const fields = exchange.upstreamFields;
    fields.push('host', upstream.host);
    // gRPC servers may refuse a call without it (gRPC over HTTP/2, "Requests"), whatever the client
    // takes; a client that takes trailers has asked for them already.
    if (exchange.grpc && !exchange.relaysTrailers) fields.push('te', 'trailers');
    exchange.dispatch(this, upstream.pool, {
      path: req.url ?? '/',
      method: req.method as Dispatcher.HttpMethod,
      headers: fields as string[],
      // undici takes an async iterable as a body (its types say Readable): framed by the Content-Length
      // among the fields, or chunked without one.
      body: exchange.hasBody ? (countedBody(exchange) as unknown as Readable) : null,
      headersTimeout: this.proxyTimeout,
      bodyTimeout: this.proxyTimeout,
    });
    this.options.latency?.request(performance.now() - exchange.arrivedAt);
    return true;
  }

  /** The upstream exchange failed: 502 or 504 when nothing was answered yet, else a cut connection. */
  fail(error: Error, exchange: Exchange): void {
    const { req, res } = exchange;
    const timedOut = timeoutCodes.has((error as NodeJS.ErrnoException).code ?? '');
    // The client has gone (an HTTP/2 stream reset before Node destroys it has a live socket).
    if (req.socket.destroyed || res.destroyed) {
      exchange.upstreamOutcome = 'client_aborted';
      return;
    }
    if (exchange.upstreamOutcome === 'completed') {
      exchange.upstreamOutcome = timedOut
        ? 'timeout'
        : isInvalidAnswer(error)
          ? 'invalid'
          : exchange.upstreamMs === null
            ? 'unreachable'
            : 'reset';
    }
    const notHttp2 = exchange.grpc && spokeNoHttp2(error);
    if (notHttp2) exchange.upstreamOutcome = 'invalid';
    this.options.logger.warn(
      {
        err: { code: (error as NodeJS.ErrnoException).code, message: error.message },
        outcome: exchange.upstreamOutcome,
      },
      notHttp2
        ? 'the upstream of a gRPC API does not speak HTTP/2 (h2c for http://, ALPN h2 for https://)'
        : 'upstream exchange failed',
    );
    // The upstream went away mid-body: the client must see a broken response, not wait for the rest;
    // a gRPC client is told the call's status in trailers, as a gRPC server would.
    if (res.headersSent) {
      if (isGrpcCall(req))
        this.endCall(
          res,
          timedOut ? grpcStatus.DEADLINE_EXCEEDED : grpcStatus.UNAVAILABLE,
          timedOut ? 'Gateway Timeout' : 'Bad Gateway',
        );
      else res.destroy();
      return;
    }
    exchange.status = timedOut ? 504 : 502;
    exchange.answeredBytes += sendError(res, timedOut ? 'gateway_timeout' : 'bad_gateway', exchange.fields);
  }

  /**
   * The upstream ended a gRPC call (HTTP 200) without a `grpc-status`, in its head or its trailers:
   * its answer breaks gRPC (outcome `invalid`), and the client is given the gateway's status.
   */
  answeredWithoutStatus(exchange: Exchange): void {
    exchange.upstreamOutcome = 'invalid';
    this.options.logger.warn(
      { outcome: exchange.upstreamOutcome },
      'the upstream ended a gRPC call without a grpc-status',
    );
  }

  /**
   * Ends a gRPC call whose answer has begun with a status of the gateway's own, in its trailers. They
   * wait behind what the client has not read: one that has not taken them within proxyTimeout is
   * taking nothing (undici's stream was paused on it for as long already when the upstream timed out),
   * and its stream is reset, so that the exchange, and its slot, end.
   */
  private endCall(res: ServerResponse, code: number, message: string): void {
    endWithGrpcStatus(res, code, message);
    // Destroyed once its stream has closed: all of it was sent, or the client reset it.
    if (res.destroyed) return;
    const unread = this.timers.setTimeout(() => cancelCall(res), this.proxyTimeout);
    res.once('close', () => this.timers.clearTimeout(unread));
  }

  /**
   * The steps of a WebSocket opening, as http-proxy-3's `ws()` runs it (`followWebSocketOpenings`): the
   * upstream request is watched, the 101's fields made the gateway's before they are written, and the
   * link set on the sockets once they are open.
   */
  private readonly webSocketSteps: WebSocketSteps = {
    requested: (proxyReq, req) => {
      const exchange = exchangeOf(req)!;
      proxyReq.setTimeout(this.proxyTimeout, () => proxyReq.destroy(new UpgradeTimeout('upgrade timed out')));
      req.socket.once('close', () => {
        if (exchange.webSocket === null) proxyReq.destroy();
      });
      proxyReq.on('response', (proxyRes: IncomingMessage) => {
        // The upstream refused the upgrade: its answer is relayed, and the connection closes after it.
        this.answered(exchange, proxyRes, ['connection', 'close']);
        proxyRes.on('data', (chunk: Buffer) => {
          exchange.bytesOut += chunk.length;
        });
      });
    },
    switching: (req, proxyRes, upstreamSocket) => {
      this.answered(exchangeOf(req)!, proxyRes, ['connection', 'Upgrade', 'upgrade', 'websocket']);
      if (req.socket.destroyed) upstreamSocket.destroy();
    },
    opened: (req, client, upstreamSocket) => {
      const exchange = exchangeOf(req)!;
      exchange.webSocket = new WebSocketLink(exchange, client, upstreamSocket, this.webSocketLimits);
    },
    failed: (error, req) => this.upgradeFailed(error, req),
  };

  /** The upstream's answer to an upgrade request, its fields made the end-to-end ones and the gateway's. */
  private answered(exchange: Exchange, proxyRes: IncomingMessage, connection: readonly string[]): void {
    exchange.upstreamMs = performance.now() - exchange.forwardedAt;
    exchange.status = proxyRes.statusCode ?? 0;
    exchange.responseHeaders = proxyRes.headers;
    const fields = appendEndToEndResponseFields(proxyRes.headers, [...exchange.fields, ...connection], null);
    proxyRes.headers = headersOf(fields, []) as IncomingHttpHeaders;
  }

  /** A failed upgrade exchange, or an upstream socket that failed once open. */
  private upgradeFailed(error: Error, req: IncomingMessage): void {
    const exchange = exchangeOf(req)!;
    if (exchange.status === 0) {
      this.fail(error, exchange);
      return;
    }
    // The gateway is ending the WebSocket (an upstream it cut off may fail as it goes): the close frame
    // it sent the client goes before the connection closes.
    if (exchange.webSocket !== null && exchange.webSocket.endedBy !== null) return;
    // After the upstream's answer began: the connection breaks, as it would have without the gateway.
    if (exchange.upstreamOutcome === 'completed') {
      exchange.upstreamOutcome = 'reset';
      this.options.logger.warn(
        { err: { code: (error as NodeJS.ErrnoException).code, message: error.message }, outcome: 'reset' },
        'upstream WebSocket failed',
      );
    }
    req.socket.destroy();
  }

  private upstreamOf(api: CompiledApi): Upstream {
    const known = this.upstreamOfApi.get(api);
    if (known) return known;
    const { protocol } = api.config;
    const key = `${protocol} ${api.upstreamOrigin}`;
    const existing = this.upstreams.get(key);
    if (existing) {
      this.upstreamOfApi.set(api, existing);
      return existing;
    }
    const target = new URL(api.upstreamOrigin);
    // One connection per exchange in flight, kept alive between them (as long as the upstream's
    // Keep-Alive says, 4 s without one), answers read one at a time (no pipelining); TLS verified.
    const pool =
      protocol === 'grpc'
        ? new Http2Upstream(api.upstreamOrigin, this.proxyTimeout, this.timers)
        : new Pool(api.upstreamOrigin, { pipelining: 1, connectTimeout: this.proxyTimeout });
    // `toProxy`: the upgrade's target goes as the gateway routed it, not parsed again as a URL.
    const server = createProxyServer({ target, selfHandleResponse: true, xfwd: false, toProxy: true });
    const openWebSocket = followWebSocketOpenings(server, this.webSocketSteps);
    const upstream: Upstream = { server, pool, host: target.host, openWebSocket };
    server.before('web', 'deleteLength', (req: IncomingMessage) => this.send(req, upstream));
    // Errors of a WebSocket's exchange come to `upgradeFailed`; this one hears those of its client socket.
    server.on('error', () => undefined);
    this.upstreams.set(key, upstream);
    this.upstreamOfApi.set(api, upstream);
    return upstream;
  }
}
