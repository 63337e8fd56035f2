import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import type { CompiledApi } from '../catalog/router.js';
import { sendError } from '../errors.js';
import type { Logger } from '../log.js';
import { endToEndResponseHeaders } from './hop-by-hop.js';

/** How an exchange with the upstream ended. */
export type ProxyOutcome = 'completed' | 'unreachable' | 'timeout' | 'reset' | 'client_aborted';

/** What one proxied exchange did; byte counts are body bytes as they streamed through. */
export interface Exchange {
  status: number;
  bytesIn: number;
  bytesOut: number;
  /** Milliseconds until the upstream's response headers arrived; null when none did. */
  upstreamMs: number | null;
  outcome: ProxyOutcome;
}

interface ExchangeState extends Exchange {
  startedAt: number;
}

class UpstreamTimeoutError extends Error {
  readonly code = 'UPSTREAM_TIMEOUT';
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
  private readonly exchanges = new WeakMap<IncomingMessage, ExchangeState>();

  constructor(private readonly options: UpstreamProxyOptions) {}

  /** Forwards `req` to `api`'s upstream at `upstreamTarget`; resolves when the client response has closed. */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    api: CompiledApi,
    upstreamTarget: string,
  ): Promise<Exchange> {
    return new Promise((resolve) => {
      const state: ExchangeState = {
        status: 0,
        bytesIn: 0,
        bytesOut: 0,
        upstreamMs: null,
        outcome: 'completed',
        startedAt: performance.now(),
      };
      this.exchanges.set(req, state);
      // Attached in the same tick as http-proxy's pipe, so no chunk flows uncounted.
      req.on('data', (chunk: Buffer) => {
        state.bytesIn += chunk.length;
      });
      res.once('close', () => {
        if (!res.writableFinished && state.outcome === 'completed') state.outcome = 'client_aborted';
        const { startedAt, ...exchange } = state;
        resolve(exchange);
      });
      req.url = upstreamTarget;
      this.serverFor(api).web(req, res);
    });
  }

  /** Closes idle upstream connections; call after the last exchange. */
  close(): void {
    for (const { agent } of this.servers.values()) agent.destroy();
    this.servers.clear();
  }

  private respond(proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse): void {
    const state = this.exchanges.get(req);
    if (!state) return;
    state.upstreamMs = performance.now() - state.startedAt;
    state.status = proxyRes.statusCode ?? 502;
    res.statusCode = state.status;
    for (const [name, value] of Object.entries(endToEndResponseHeaders(proxyRes.headers))) {
      // Headers the gateway set itself (X-Request-Id, rate-limit fields) win over the upstream's.
      if (value !== undefined && !res.hasHeader(name)) res.setHeader(name, value);
    }
    proxyRes.on('data', (chunk: Buffer) => {
      state.bytesOut += chunk.length;
    });
    proxyRes.once('close', () => {
      // The upstream went away mid-body: the client must see a broken response, not wait for the rest.
      if (!proxyRes.complete) {
        if (state.outcome === 'completed') state.outcome = 'reset';
        res.destroy();
      }
    });
    proxyRes.pipe(res);
  }

  private fail(error: Error, req: IncomingMessage, res: ServerResponse, state: ExchangeState): void {
    const timedOut = error instanceof UpstreamTimeoutError;
    if (req.socket.destroyed) {
      state.outcome = 'client_aborted';
      return;
    }
    if (state.outcome === 'completed')
      state.outcome = timedOut ? 'timeout' : state.upstreamMs === null ? 'unreachable' : 'reset';
    this.options.logger.warn(
      {
        err: { code: (error as NodeJS.ErrnoException).code, message: error.message },
        outcome: state.outcome,
      },
      'upstream exchange failed',
    );
    if (res.headersSent) {
      res.destroy();
      return;
    }
    state.status = timedOut ? 504 : 502;
    sendError(res, timedOut ? 'gateway_timeout' : 'bad_gateway');
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
    server.on('proxyReq', (proxyReq) => {
      proxyReq.setTimeout(this.options.proxyTimeout, () =>
        proxyReq.destroy(new UpstreamTimeoutError('upstream timeout')),
      );
    });
    server.on('proxyRes', (proxyRes, req, res) => this.respond(proxyRes, req, res));
    server.on('error', (error, req, res) => {
      const state = this.exchanges.get(req);
      if (state && 'writeHead' in res) this.fail(error, req, res, state);
    });
    this.servers.set(api.upstreamOrigin, { server, agent });
    return server;
  }
}
