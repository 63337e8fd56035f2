import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import { Pool, type Dispatcher } from 'undici';
import type { AddedLatencySink } from '../../observe/added-latency.js';
import type { CompiledApi } from '../../catalog/router.js';
import { sendError } from '../errors.js';
import type { Logger } from '../../observe/log.js';
import {
  announceTrailers,
  appendEndToEndResponseFields,
  endToEndTrailers,
  namedInConnection,
} from './hop-by-hop.js';

/** How an exchange with the upstream ended. */
export type ProxyOutcome = 'completed' | 'unreachable' | 'timeout' | 'reset' | 'invalid' | 'client_aborted';

/** Links the request and the response of an exchange to it, for shared listeners. */
const exchangeKey = Symbol('quotagate.exchange');
type Linked<T> = T & { [exchangeKey]?: Exchange };

/** The upstream answered something no client may be given: a status below 100. */
class InvalidUpstreamResponse extends Error {
  readonly code = 'UPSTREAM_INVALID_RESPONSE';
}

const timeoutCodes: ReadonlySet<string> = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

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
export class Exchange implements Dispatcher.DispatchHandler {
  /** When the request arrived (`performance.now()`, milliseconds). */
  readonly arrivedAt = performance.now();
  status = 0;
  bytesIn = 0;
  bytesOut = 0;
  /** Body bytes of an answer the gateway made itself (an error), which no byte quota is charged. */
  answeredBytes = 0;
  /** The upstream's response fields (lower-case names), once they came. */
  responseHeaders: IncomingHttpHeaders | null = null;
  /** The upstream's trailer fields, once its answer ended with any. */
  responseTrailers: IncomingHttpHeaders | null = null;
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
  /** undici's control of the upstream exchange: pause, resume, abort. */
  private controller: Dispatcher.DispatchController | null = null;
  /** Ended, one way or another: the upstream has nothing more to say. */
  private settled = false;
  /** Where the upstream's failures are told, and the time the gateway adds recorded. */
  private proxy: UpstreamProxy | null = null;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
  ) {
    (req as Linked<IncomingMessage>)[exchangeKey] = this;
    (res as Linked<ServerResponse>)[exchangeKey] = this;
  }

  /** How the exchange ended, once the client response has closed. */
  outcome(): ProxyOutcome {
    return this.upstreamOutcome === 'completed' && !this.res.writableFinished
      ? 'client_aborted'
      : this.upstreamOutcome;
  }

  /** Ends the upstream side once the client has gone: an upstream exchange still running is aborted. */
  abandonUpstream(): void {
    if (this.settled || !this.controller || this.res.writableFinished) return;
    this.settled = true;
    this.controller.abort(new Error('the client went away'));
  }

  /** Starts the upstream exchange on `pool`. */
  dispatch(proxy: UpstreamProxy, pool: Pool, options: Dispatcher.DispatchOptions): void {
    this.proxy = proxy;
    pool.dispatch(options, this);
  }

  /** The client is ready for more: the upstream may send again. */
  resumeUpstream(): void {
    this.controller?.resume();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
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
      this.settled = true;
      this.proxy?.fail(new InvalidUpstreamResponse(`upstream answered status ${statusCode}`), this);
      controller.abort(new Error('invalid upstream answer'));
      return;
    }
    const { res } = this;
    this.upstreamMs = respondedAt - this.forwardedAt;
    this.status = statusCode;
    this.responseHeaders = headers;
    // One writeHead with a flat list, and no setHeader: Node then formats the head in one pass. Only an
    // auth plugin that set fields of its own takes the slower merge, and its fields win too.
    const fields = appendEndToEndResponseFields(
      headers,
      this.fields,
      res.getHeaderNames().length > 0 ? res : null,
    );
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
    this.bytesOut += chunk.length;
    if (!this.res.write(chunk)) controller.pause();
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.settled = true;
    this.responseTrailers = trailers;
    if (this.relaysTrailers) {
      const relayed = endToEndTrailers(trailers, namedInConnection(this.responseHeaders ?? trailers));
      if (relayed) this.res.addTrailers(relayed);
    }
    this.res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.proxy?.fail(error, this);
  }
}

/** Whether a Content-Type names an event stream (text/event-stream, the WHATWG HTML standard §9.2). */
const isEventStream = (type: string | undefined): boolean =>
  type !== undefined && type.length >= 17 && type.slice(0, 17).toLowerCase() === 'text/event-stream';

/** The exchange of a request or response it made. */
export const exchangeOf = (emitter: object): Exchange | undefined => (emitter as Linked<object>)[exchangeKey];

/**
 * The request body as undici reads it, counted on the way. undici pulls a chunk only when it has a
 * connection to write it to, so none is read before then (a 'data' listener would start the flow).
 */
async function* countedBody(exchange: Exchange): AsyncGenerator<Buffer> {
  for await (const chunk of exchange.req as AsyncIterable<Buffer>) {
    exchange.bytesIn += chunk.length;
    yield chunk;
  }
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
}

/** One upstream origin: its http-proxy-3 server, its keep-alive connections, and its Host. */
interface Upstream {
  readonly server: ProxyServer;
  readonly pool: Pool;
  /** The Host the upstream is sent: its own (http-proxy-3's `changeOrigin`). */
  readonly host: string;
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
  /** Milliseconds the upstream has to answer, then between body chunks; a reload changes it for the exchanges that follow. */
  proxyTimeout: number;

  constructor(private readonly options: UpstreamProxyOptions) {
    this.proxyTimeout = options.proxyTimeout;
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
    req.url = upstreamTarget;
    this.upstreamOf(api).server.web(req, res);
  }

  /** Closes the upstream connections; call after the last exchange. */
  async close(): Promise<void> {
    const pools = [...this.upstreams.values()].map(({ pool }) => pool.destroy());
    this.upstreams.clear();
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
    if (req.socket.destroyed) {
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
    this.options.logger.warn(
      {
        err: { code: (error as NodeJS.ErrnoException).code, message: error.message },
        outcome: exchange.upstreamOutcome,
      },
      'upstream exchange failed',
    );
    // The upstream went away mid-body: the client must see a broken response, not wait for the rest.
    if (res.headersSent) {
      res.destroy();
      return;
    }
    exchange.status = timedOut ? 504 : 502;
    exchange.answeredBytes += sendError(res, timedOut ? 'gateway_timeout' : 'bad_gateway', exchange.fields);
  }

  private upstreamOf(api: CompiledApi): Upstream {
    const existing = this.upstreams.get(api.upstreamOrigin);
    if (existing) return existing;
    const target = new URL(api.upstreamOrigin);
    // One connection per exchange in flight, kept alive between them (as long as the upstream's
    // Keep-Alive says, 4 s without one), answers read one at a time (no pipelining); TLS verified.
    const pool = new Pool(api.upstreamOrigin, { pipelining: 1, connectTimeout: this.proxyTimeout });
    const server = createProxyServer({ target, selfHandleResponse: true, xfwd: false });
    const upstream: Upstream = { server, pool, host: target.host };
    server.before('web', 'deleteLength', (req: IncomingMessage) => this.send(req, upstream));
    this.upstreams.set(api.upstreamOrigin, upstream);
    return upstream;
  }
}
