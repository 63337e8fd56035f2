import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { performance } from 'node:perf_hooks';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
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
  /** Set once the exchange has been handed to the upstream. */
  forwarded = false;
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
}

/** The exchange of a request, response or upstream request or response it made. */
export const exchangeOf = (emitter: object): Exchange | undefined => (emitter as Linked<object>)[exchangeKey];

// The listeners of every exchange, shared: `this` is the emitter, linked to its exchange.
function countRequestBytes(this: IncomingMessage, chunk: Buffer): void {
  exchangeOf(this)!.bytesIn += chunk.length;
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

/** Undoes http-proxy-3's deleteLength pass on a chunked request (see `serverFor`). */
function restoreChunkedFraming(req: IncomingMessage): void {
  if (req.headers['content-length'] !== '0' || req.headers['transfer-encoding'] !== undefined) return;
  // `headersDistinct` is read from the raw header lines, not from `req.headers`, which the pass changed.
  const sent = req.headersDistinct['transfer-encoding'];
  if (!sent) return;
  const { 'content-length': _zero, ...framed } = req.headers;
  req.headers = { ...framed, 'transfer-encoding': sent.join(', ') };
}

export interface UpstreamProxyOptions {
  /** Idle time after which the upstream exchange is abandoned with 504 (or a closed connection). */
  proxyTimeout: number;
  logger: Logger;
}

/**
 * Streams requests to upstreams with http-proxy-3 over keep-alive agents (one per upstream origin) and
 * streams the responses back without hop-by-hop fields. Internal details of failures go to the log, never
 * to the client.
 */
export class UpstreamProxy {
  /** One http-proxy-3 server per upstream origin, its target and agent set once, not per request. */
  private readonly servers = new Map<string, { server: ProxyServer; agent: http.Agent }>();
  /** Milliseconds of upstream idleness before 504; a reload changes it for the exchanges that follow. */
  proxyTimeout: number;

  constructor(private readonly options: UpstreamProxyOptions) {
    this.proxyTimeout = options.proxyTimeout;
  }

  /**
   * Forwards the exchange's request to `api`'s upstream at `upstreamTarget`. The exchange is complete
   * once the client response has closed.
   */
  forward(exchange: Exchange, api: CompiledApi, upstreamTarget: string): void {
    const { req, res } = exchange;
    exchange.forwarded = true;
    exchange.forwardedAt = performance.now();
    // Attached in the same tick as http-proxy's pipe, so no chunk flows uncounted.
    req.on('data', countRequestBytes);
    req.url = upstreamTarget;
    this.serverFor(api).web(req, res);
  }

  /** Closes idle upstream connections; call after the last exchange. */
  close(): void {
    for (const { agent } of this.servers.values()) agent.destroy();
    this.servers.clear();
  }

  private readonly upstreamRequest = (proxyReq: http.ClientRequest, req: IncomingMessage): void => {
    (proxyReq as Linked<http.ClientRequest>)[exchangeKey] = exchangeOf(req);
    proxyReq.setTimeout(this.proxyTimeout, upstreamTimedOut);
    // Without a listener Node destroys the socket of an unasked 101 and tells no one: the client would
    // wait for an answer that never comes.
    proxyReq.on('upgrade', this.unaskedUpgrade);
  };

  /** The 'upgrade' listener of every upstream request: `this` is the request. */
  private readonly unaskedUpgrade = ((proxy: UpstreamProxy) =>
    function (this: http.ClientRequest, _upgraded: IncomingMessage, socket: Duplex): void {
      socket.destroy();
      const exchange = exchangeOf(this);
      const error = new InvalidUpstreamResponse('upstream switched protocols unasked (101)');
      if (exchange) proxy.fail(error, exchange);
    })(this);

  private readonly respond = (proxyRes: IncomingMessage, req: IncomingMessage): void => {
    const exchange = exchangeOf(req);
    if (!exchange) return;
    const { res } = exchange;
    const status = proxyRes.statusCode ?? 0;
    // Node's client hands on any three digits but the 1xx it handles itself; writeHead throws below 100.
    if (status < 100) {
      proxyRes.destroy();
      this.fail(new InvalidUpstreamResponse(`upstream answered status ${status}`), exchange);
      return;
    }
    exchange.upstreamMs = performance.now() - exchange.forwardedAt;
    exchange.status = status;
    // One writeHead with a flat list, and no setHeader: Node then formats the head in one pass. Only an
    // auth plugin that set fields of its own takes the slower merge, and its fields win too.
    const fields = appendEndToEndResponseFields(
      proxyRes.headers,
      [...exchange.fields],
      res.getHeaderNames().length > 0 ? res : null,
    );
    res.writeHead(status, fields);
    // A hand-made pipe: one listener per event instead of pipe()'s eight, with the byte count folded in.
    (proxyRes as Linked<IncomingMessage>)[exchangeKey] = exchange;
    exchange.upstreamResponse = proxyRes;
    proxyRes.on('data', relayChunk);
    res.on('drain', resumeUpstream);
    proxyRes.on('end', endResponse);
    proxyRes.on('close', upstreamClosed);
  };

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

  private serverFor(api: CompiledApi): ProxyServer {
    const existing = this.servers.get(api.upstreamOrigin);
    if (existing) return existing.server;
    const agentOptions = { keepAlive: true, scheduling: 'lifo' as const };
    const agent = api.upstreamOrigin.startsWith('https:')
      ? new https.Agent(agentOptions)
      : new http.Agent(agentOptions);
    // selfHandleResponse: the response is written here, so hop-by-hop hygiene and byte counting are ours.
    const server = createProxyServer({
      target: new URL(api.upstreamOrigin),
      agent,
      changeOrigin: true,
      selfHandleResponse: true,
      xfwd: false,
    });
    // http-proxy-3's deleteLength pass gives a DELETE or OPTIONS without Content-Length a
    // `content-length: 0` and drops its Transfer-Encoding, so a chunked body would follow unframed and be
    // read upstream as another request. The pass after it puts the chunked framing back.
    server.before('web', 'timeout', restoreChunkedFraming);
    server.on('proxyReq', this.upstreamRequest);
    server.on('proxyRes', this.respond);
    server.on('error', (error, req) => {
      const exchange = exchangeOf(req);
      if (exchange) this.fail(error, exchange);
    });
    this.servers.set(api.upstreamOrigin, { server, agent });
    return server;
  }
}
