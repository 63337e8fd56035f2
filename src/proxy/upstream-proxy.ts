import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import type { CompiledApi } from '../catalog/router.js';
import { sendError } from '../errors.js';
import type { Logger } from '../log.js';
import { appendEndToEndResponseFields } from './hop-by-hop.js';

/** How an exchange with the upstream ended. */
export type ProxyOutcome = 'completed' | 'unreachable' | 'timeout' | 'reset' | 'invalid' | 'client_aborted';

/**
 * What one proxied exchange did, filled in while it runs; byte counts are body bytes as they streamed
 * through. Read it once the client response has closed, through `outcomeOf` for the outcome.
 */
export class Exchange {
  status = 0;
  bytesIn = 0;
  bytesOut = 0;
  /** Milliseconds until the upstream's response headers arrived; null when none did. */
  upstreamMs: number | null = null;
  /** How the upstream side ended; the client's abort is only known at the end (`outcomeOf`). */
  outcome: ProxyOutcome = 'completed';
  readonly startedAt = performance.now();

  constructor(
    /** Response fields the gateway adds, as name, value pairs; they win over the upstream's. */
    readonly gatewayFields: readonly string[],
  ) {}
}

/** The outcome of an exchange whose client response has closed. */
export function outcomeOf(exchange: Exchange, res: ServerResponse): ProxyOutcome {
  return exchange.outcome === 'completed' && !res.writableFinished ? 'client_aborted' : exchange.outcome;
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
  private readonly exchanges = new WeakMap<IncomingMessage, Exchange>();

  constructor(private readonly options: UpstreamProxyOptions) {}

  /**
   * Forwards `req` to `api`'s upstream at `upstreamTarget`. The returned exchange is complete once the
   * client response has closed.
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    api: CompiledApi,
    upstreamTarget: string,
    gatewayFields: readonly string[],
  ): Exchange {
    const exchange = new Exchange(gatewayFields);
    this.exchanges.set(req, exchange);
    // Attached in the same tick as http-proxy's pipe, so no chunk flows uncounted.
    req.on('data', (chunk: Buffer) => {
      exchange.bytesIn += chunk.length;
    });
    req.url = upstreamTarget;
    this.serverFor(api).web(req, res);
    return exchange;
  }

  /** Closes idle upstream connections; call after the last exchange. */
  close(): void {
    for (const { agent } of this.servers.values()) agent.destroy();
    this.servers.clear();
  }

  private respond(proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse): void {
    const exchange = this.exchanges.get(req);
    if (!exchange) return;
    const status = proxyRes.statusCode ?? 0;
    // Node's client hands on any three digits but the 1xx it handles itself; writeHead throws below 100.
    if (status < 100) {
      proxyRes.destroy();
      this.fail(new InvalidUpstreamResponse(`upstream answered status ${status}`), req, res, exchange);
      return;
    }
    exchange.upstreamMs = performance.now() - exchange.startedAt;
    exchange.status = status;
    // One writeHead with a flat list, and no setHeader: Node then formats the head in one pass. Only an
    // auth plugin that set fields of its own takes the slower merge, and its fields win too.
    const fields = appendEndToEndResponseFields(
      proxyRes.headers,
      [...exchange.gatewayFields],
      res.getHeaderNames().length > 0 ? res : null,
    );
    res.writeHead(exchange.status, fields);
    // A hand-made pipe: one listener per event instead of pipe()'s eight, with the byte count folded in.
    proxyRes.on('data', (chunk: Buffer) => {
      exchange.bytesOut += chunk.length;
      if (!res.write(chunk)) proxyRes.pause();
    });
    res.on('drain', () => proxyRes.resume());
    proxyRes.once('end', () => res.end());
    proxyRes.once('close', () => {
      // The upstream went away mid-body: the client must see a broken response, not wait for the rest.
      if (!proxyRes.complete) {
        if (exchange.outcome === 'completed') exchange.outcome = 'reset';
        res.destroy();
      }
    });
  }

  private fail(error: Error, req: IncomingMessage, res: ServerResponse, exchange: Exchange): void {
    const timedOut = error instanceof UpstreamTimeoutError;
    if (req.socket.destroyed) {
      exchange.outcome = 'client_aborted';
      return;
    }
    if (exchange.outcome === 'completed') {
      exchange.outcome = timedOut
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
        outcome: exchange.outcome,
      },
      'upstream exchange failed',
    );
    if (res.headersSent) {
      res.destroy();
      return;
    }
    exchange.status = timedOut ? 504 : 502;
    sendError(res, timedOut ? 'gateway_timeout' : 'bad_gateway', exchange.gatewayFields);
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
    server.on('proxyReq', (proxyReq, req, res) => {
      proxyReq.setTimeout(this.options.proxyTimeout, () =>
        proxyReq.destroy(new UpstreamTimeoutError('upstream timeout')),
      );
      // Without a listener Node destroys the socket of an unasked 101 and tells no one: the client
      // would wait for an answer that never comes.
      proxyReq.on('upgrade', (_upgraded, socket) => {
        socket.destroy();
        const exchange = this.exchanges.get(req);
        const error = new InvalidUpstreamResponse('upstream switched protocols unasked (101)');
        if (exchange) this.fail(error, req, res, exchange);
      });
    });
    server.on('proxyRes', (proxyRes, req, res) => this.respond(proxyRes, req, res));
    server.on('error', (error, req, res) => {
      const exchange = this.exchanges.get(req);
      if (exchange && 'writeHead' in res) this.fail(error, req, res, exchange);
    });
    this.servers.set(api.upstreamOrigin, { server, agent });
    return server;
  }
}
