import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { performance } from 'node:perf_hooks';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import type { AddedLatencySink } from '../added-latency.js';
import type { CompiledApi } from '../catalog/router.js';
import { sendError } from '../errors.js';
import type { Logger } from '../log.js';
import { appendEndToEndResponseFields } from './hop-by-hop.js';

/** How an exchange with the upstream ended. */
export type ProxyOutcome = 'completed' | 'unreachable' | 'timeout' | 'reset' | 'invalid' | 'client_aborted';

/** Links the request, the response, and the upstream request and response of an exchange to it, for shared listeners. */
const exchangeKey = Symbol('quotagate.exchange');
type Linked<T> = T & { [exchangeKey]?: Exchange };

/**
 * One proxied exchange: the client's request and response, and what the exchange did, filled in while it
 * runs; byte counts are body bytes as they streamed through. The gateway's record of a request is an
 * Exchange, so a request is one object however many events it sees: every listener is a function shared
 * by all exchanges that finds its exchange through the emitter. Read it once the client response has
 * closed, through `outcome()`.
 */
export class Exchange {
  /** When the request arrived (`performance.now()`, milliseconds). */
  readonly arrivedAt = performance.now();
  status = 0;
  bytesIn = 0;
  bytesOut = 0;
  /** Body bytes of an answer the gateway made itself (an error), which no byte quota is charged. */
  answeredBytes = 0;
  /** Milliseconds from forwarding until the upstream's response headers arrived; null when none did. */
  upstreamMs: number | null = null;
  /** How the upstream side ended; the client's abort is only known at the end (`outcome()`). */
  upstreamOutcome: ProxyOutcome = 'completed';
  forwardedAt = 0;
  /** Response fields the gateway adds, as name, value pairs; they win over the upstream's. */
  readonly fields: string[] = [];
  /**
   * The upstream request's fields but `Host`, as name, value pairs: the request's end-to-end fields and
   * those the gateway sets. Node writes a list as it is, where an object would be set field by field.
   */
  readonly upstreamFields: Array<string | string[]> = [];
  /** Whether the request announced a body, which then streams upstream. */
  hasBody = false;
  /** Set once the exchange has been handed to the upstream. */
  forwarded = false;
  upstreamRequest: http.ClientRequest | null = null;
  upstreamResponse: IncomingMessage | null = null;

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

  /** Ends the upstream side once the client has gone: an upstream request still running is destroyed. */
  abandonUpstream(): void {
    const upstream = this.upstreamRequest;
    if (upstream && !this.res.writableFinished && !upstream.destroyed) upstream.destroy();
  }
}

/** The exchange of a request, response or upstream request or response it made. */
export const exchangeOf = (emitter: object): Exchange | undefined => (emitter as Linked<object>)[exchangeKey];

// The listeners of every exchange, shared: `this` is the emitter, linked to its exchange.
function relayRequestChunk(this: IncomingMessage, chunk: Buffer): void {
  const exchange = exchangeOf(this)!;
  exchange.bytesIn += chunk.length;
  if (!exchange.upstreamRequest!.write(chunk)) this.pause();
}
function resumeRequest(this: http.ClientRequest): void {
  exchangeOf(this)!.req.resume();
}
function endUpstreamRequest(this: IncomingMessage): void {
  exchangeOf(this)!.upstreamRequest!.end();
}
function relayChunk(this: IncomingMessage, chunk: Buffer): void {
  const exchange = exchangeOf(this)!;
  exchange.bytesOut += chunk.length;
  if (!exchange.res.write(chunk)) this.pause();
}
function resumeUpstream(this: ServerResponse): void {
  exchangeOf(this)!.upstreamResponse?.resume();
}
function endResponse(this: IncomingMessage): void {
  exchangeOf(this)!.res.end();
}
function upstreamTimedOut(this: http.ClientRequest): void {
  this.destroy(new UpstreamTimeoutError('upstream timeout'));
}
function upstreamClosed(this: IncomingMessage): void {
  // The upstream went away mid-body: the client must see a broken response, not wait for the rest.
  if (this.complete) return;
  const exchange = exchangeOf(this)!;
  if (exchange.upstreamOutcome === 'completed') exchange.upstreamOutcome = 'reset';
  exchange.res.destroy();
}

class UpstreamTimeoutError extends Error {
  readonly code = 'UPSTREAM_TIMEOUT';
}

/** The upstream answered something no client may be given: a status below 100, an unasked 101. */
class InvalidUpstreamResponse extends Error {
  readonly code = 'UPSTREAM_INVALID_RESPONSE';
}

export interface UpstreamProxyOptions {
  /** Idle time after which the upstream exchange is abandoned with 504 (or a closed connection). */
  proxyTimeout: number;
  logger: Logger;
  /** Records the time the gateway adds to each exchange. */
  latency?: AddedLatencySink;
}

/** One upstream origin: its http-proxy-3 server, its keep-alive agent, and where requests go. */
interface Upstream {
  readonly server: ProxyServer;
  readonly agent: http.Agent;
  readonly request: typeof http.request;
  readonly hostname: string;
  readonly port: number;
  /** The Host the upstream is sent: its own (http-proxy-3's `changeOrigin`). */
  readonly host: string;
}

/**
 * Streams requests to upstreams over keep-alive agents (one per upstream origin) and streams the
 * responses back without hop-by-hop fields. Internal details of failures go to the log, never to the
 * client.
 *
 * Each origin has an http-proxy-3 server whose `web()` runs the exchange through its passes. The gateway
 * has already done what http-proxy-3's own web passes do (framing, X-Forwarded-*, the target path, the
 * Host, hop-by-hop fields; the response is written here with `selfHandleResponse`), so its first pass is
 * the gateway's `forward`, which sends the prepared request and halts the pass loop: `deleteLength`,
 * `timeout`, `XHeaders` and `stream` never run. `forward` hands Node the upstream head as one list of
 * fields, which Node writes as it is, instead of the object `stream` builds and Node sets field by field.
 */
export class UpstreamProxy {
  private readonly upstreams = new Map<string, Upstream>();
  /** Milliseconds of upstream idleness before 504; a reload changes it for the exchanges that follow. */
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

  /** Closes idle upstream connections; call after the last exchange. */
  close(): void {
    for (const { agent } of this.upstreams.values()) agent.destroy();
    this.upstreams.clear();
  }

  /** The pass that sends the exchange's request upstream; it halts http-proxy-3's pass loop. */
  private send(req: IncomingMessage, upstream: Upstream): true {
    const exchange = exchangeOf(req)!;
    const fields = exchange.upstreamFields;
    fields.push('host', upstream.host);
    const upstreamRequest = upstream.request({
      agent: upstream.agent,
      hostname: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: fields as unknown as http.OutgoingHttpHeaders,
      timeout: this.proxyTimeout,
    });
    (upstreamRequest as Linked<http.ClientRequest>)[exchangeKey] = exchange;
    exchange.upstreamRequest = upstreamRequest;
    upstreamRequest.on('response', this.respond);
    upstreamRequest.on('error', this.upstreamFailed);
    upstreamRequest.on('timeout', upstreamTimedOut);
    // Without a listener Node destroys the socket of an unasked 101 and tells no one: the client would
    // wait for an answer that never comes.
    upstreamRequest.on('upgrade', this.unaskedUpgrade);
    if (exchange.hasBody) {
      // A hand-made pipe with the byte count folded in; attached in this tick, so no chunk flows uncounted.
      req.on('data', relayRequestChunk);
      req.on('end', endUpstreamRequest);
      upstreamRequest.on('drain', resumeRequest);
    } else {
      upstreamRequest.end();
    }
    this.options.latency?.request(performance.now() - exchange.arrivedAt);
    return true;
  }

  /** The 'error' listener of every upstream request: `this` is the request. */
  private readonly upstreamFailed = ((proxy: UpstreamProxy) =>
    function (this: http.ClientRequest, error: Error): void {
      const exchange = exchangeOf(this);
      if (exchange) proxy.fail(error, exchange);
    })(this);

  /** The 'upgrade' listener of every upstream request: `this` is the request. */
  private readonly unaskedUpgrade = ((proxy: UpstreamProxy) =>
    function (this: http.ClientRequest, _upgraded: IncomingMessage, socket: Duplex): void {
      socket.destroy();
      const exchange = exchangeOf(this);
      const error = new InvalidUpstreamResponse('upstream switched protocols unasked (101)');
      if (exchange) proxy.fail(error, exchange);
    })(this);

  /** The 'response' listener of every upstream request: `this` is the request. */
  private readonly respond = ((proxy: UpstreamProxy) =>
    function (this: http.ClientRequest, upstreamResponse: IncomingMessage): void {
      const respondedAt = performance.now();
      const exchange = exchangeOf(this)!;
      const { res } = exchange;
      const status = upstreamResponse.statusCode ?? 0;
      // Node's client hands on any three digits but the 1xx it handles itself; writeHead throws below 100.
      if (status < 100) {
        upstreamResponse.destroy();
        proxy.fail(new InvalidUpstreamResponse(`upstream answered status ${status}`), exchange);
        return;
      }
      exchange.upstreamMs = respondedAt - exchange.forwardedAt;
      exchange.status = status;
      // One writeHead with a flat list, and no setHeader: Node then formats the head in one pass. Only an
      // auth plugin that set fields of its own takes the slower merge, and its fields win too.
      const fields = appendEndToEndResponseFields(
        upstreamResponse.headers,
        exchange.fields,
        res.getHeaderNames().length > 0 ? res : null,
      );
      res.writeHead(status, fields);
      proxy.options.latency?.response(performance.now() - respondedAt);
      // A hand-made pipe: one listener per event instead of pipe()'s eight, with the byte count folded in.
      (upstreamResponse as Linked<IncomingMessage>)[exchangeKey] = exchange;
      exchange.upstreamResponse = upstreamResponse;
      upstreamResponse.on('data', relayChunk);
      res.on('drain', resumeUpstream);
      upstreamResponse.on('end', endResponse);
      upstreamResponse.on('close', upstreamClosed);
    })(this);

  private fail(error: Error, exchange: Exchange): void {
    const { req, res } = exchange;
    const timedOut = error instanceof UpstreamTimeoutError;
    if (req.socket.destroyed) {
      exchange.upstreamOutcome = 'client_aborted';
      return;
    }
    if (exchange.upstreamOutcome === 'completed') {
      exchange.upstreamOutcome = timedOut
        ? 'timeout'
        : error instanceof InvalidUpstreamResponse
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
    const secure = target.protocol === 'https:';
    // The agent's sockets keep its timeout between requests: an exchange with the same one sets no timer
    // of its own (after a reload that changes proxyTimeout, each exchange sets its socket's), and a
    // pooled socket idle that long is closed.
    const agentOptions = { keepAlive: true, scheduling: 'lifo' as const, timeout: this.proxyTimeout };
    const agent = secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
    const server = createProxyServer({ target, agent, selfHandleResponse: true, xfwd: false });
    const upstream: Upstream = {
      server,
      agent,
      request: secure ? https.request : http.request,
      // WHATWG URLs bracket IPv6 hosts; the socket wants the bare address.
      hostname: target.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: Number(target.port) || (secure ? 443 : 80),
      host: target.host,
    };
    server.before('web', 'deleteLength', (req: IncomingMessage) => this.send(req, upstream));
    this.upstreams.set(api.upstreamOrigin, upstream);
    return upstream;
  }
}
