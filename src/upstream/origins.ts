import type { IncomingMessage, ServerResponse } from 'node:http';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import { Pool } from 'undici';
import type { Clock } from '../kit/clock.js';
import type { CompiledApi } from '../catalog/router.js';
import { upstreamTargets, type ApiConfig } from '../config/schema.js';
import type { ApiUpstream } from '../console/logic/upstreams.js';
import type { TryTarget } from './exchange.js';
import type { TargetHealth } from './health-checks.js';
import type { TargetStanding } from './target-pool.js';
import { Http2Upstream, type UpstreamDispatcher } from './http2-upstream.js';
import { TargetPool, type TargetCounts } from './target-pool.js';
import { noAddresses, resolvedTargets, type AddressesOf } from './target-addresses.js';
import { upstreamConnector, webSocketAgent, type UpstreamTls } from './upstream-tls.js';
import { followWebSocketOpenings, type WebSocketOpener, type WebSocketSteps } from './websocket/relay.js';

/** One upstream origin: its http-proxy-3 server, its keep-alive connections, and its Host. */
export interface Origin extends TryTarget {
  readonly server: ProxyServer;
  readonly pool: UpstreamDispatcher;
  /**
   * The Host the upstream is sent: its own (http-proxy-3's `changeOrigin`), or for an address a target's
   * name resolved to, the name's, which TLS's SNI and certificate check then take too (undici's and
   * Node's clients derive the servername from the Host field, unless `upstream.tls.servername` says).
   */
  readonly host: string;
  /** Opens a WebSocket through `server`. */
  readonly openWebSocket: WebSocketOpener;
}

/** What an origin's server does with an exchange: the pass that sends it, and the steps of an opening. */
export interface OriginUse {
  /** Sends the request of `req`'s exchange to `origin`; it is the first of the server's web passes. */
  send(req: IncomingMessage, origin: Origin): void;
  readonly webSocketSteps: WebSocketSteps;
}

/**
 * Adds `send` ahead of `server`'s web passes, halting the pass loop: `deleteLength`, `timeout`,
 * `XHeaders` and `stream` never run, for the gateway has done their work (framing, X-Forwarded-*, the
 * target path, the Host, hop-by-hop fields; the response is written by the handlers, as with
 * `selfHandleResponse`). This is the gateway's one coupling with how http-proxy-3 runs `web()`, and
 * test/upstream/origins.test.ts checks it against the installed version: `before('web', 'deleteLength',
 * pass)` puts a pass ahead of its first one, `web(req, res)` runs the passes in order with the request
 * and response, and a pass that returns true stops the loop.
 */
export function sendFirst(
  server: ProxyServer,
  send: (req: IncomingMessage, res: ServerResponse) => void,
): void {
  server.before('web', 'deleteLength', (req: IncomingMessage, res: ServerResponse) => {
    send(req, res);
    return true;
  });
}

/**
 * The upstream origins of the APIs: one undici pool per origin (the h2 pool for a gRPC API), each inside
 * an http-proxy-3 server that runs its exchanges (`web()`) and its WebSocket openings (`ws()`).
 */
export class Origins {
  private readonly byKey = new Map<string, Origin>();
  /**
   * Each compiled API's origin, found by the API itself: its key is a string made and hashed again
   * per request otherwise (0.4% of the gateway's busy time in a profile, issue 35). A reload's new APIs
   * find the same origin through `byKey`.
   */
  private byApi = new WeakMap<CompiledApi, Origin>();
  /** The pool of each compiled API that has one (`upstream: { targets }`), made as its first exchange comes. */
  private pools = new WeakMap<CompiledApi, TargetPool<Origin>>();
  /** What was sent to each target of a pool, by its API's id and its origin: a reload keeps a target's. */
  private counts = new Map<string, TargetCounts>();
  /** The pools no API in force uses any more, closing once their exchanges are answered. */
  private readonly retiring = new Set<UpstreamDispatcher>();

  /**
   * @param connectTimeout milliseconds a connection has to open (`proxyTimeout` when the first exchange
   *   of the origin came)
   */
  constructor(
    private readonly use: OriginUse,
    private readonly connectTimeout: () => number,
    private readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
    /** What the health checks found of a target of an API (by its id and origin). */
    private readonly healthOf: (apiId: string, origin: string) => TargetHealth,
    /** What outlier detection found of a target of an API (by its id and origin). */
    private readonly standingOf: (apiId: string, origin: string) => TargetStanding,
    /** The TLS of the connections of an API (by its id) to its target at an origin (upstream-tls.ts). */
    private readonly tlsOf: (apiId: string, origin: string) => UpstreamTls | null = () => null,
    /** The addresses the targets' host names resolved to (target-addresses.ts). */
    private readonly addressesOf: AddressesOf = noAddresses,
  ) {}

  /** The origin of `api`'s upstream (the one-URL form), opened as its first exchange comes. */
  of(api: CompiledApi): Origin {
    const known = this.byApi.get(api);
    if (known) return known;
    const origin = this.origin(api.config.protocol, api.upstreamOrigin, api.config.id, null);
    this.byApi.set(api, origin);
    return origin;
  }

  /**
   * The pool of `api`'s targets (`upstream: { targets }`), made as its first exchange comes, and again
   * after the addresses of a target's name change: each target (each address of a name) has its origin
   * shared with any API that has it, and its health and standing are this API's.
   */
  poolOf(api: CompiledApi): TargetPool<Origin> {
    const known = this.pools.get(api);
    if (known) return known;
    const configured = upstreamTargets(api.config.upstream);
    const targets = resolvedTargets(configured, this.addressesOf).map(({ origin, host, weight }) => ({
      origin: this.origin(api.config.protocol, origin, api.config.id, host),
      name: origin,
      weight,
      health: this.healthOf(api.config.id, origin),
      standing: this.standingOf(api.config.id, origin),
      score: 0,
      counts: this.countsOf(api.config.id, origin),
    }));
    const { upstream } = api.config;
    const pool =
      typeof upstream === 'string'
        ? new TargetPool(targets, 'round-robin', inFlight, 0)
        : new TargetPool(
            targets,
            upstream.balance,
            inFlight,
            upstream.retries,
            upstream.outlierDetection ?? null,
          );
    this.pools.set(api, pool);
    return pool;
  }

  /**
   * The addresses of a target's host name changed: each pool is made again as its next exchange comes.
   * The exchanges in flight keep the pool they were sent from, and so an address no longer resolved
   * finishes its exchanges, and takes no new one.
   */
  addressesChanged(): void {
    this.pools = new WeakMap();
  }

  /**
   * Closes the origins that no API of `apis` (the config in force) uses any more: a one-URL upstream or
   * a pool's target a reload changed or dropped, an address its name no longer resolves to (the pods a
   * Kubernetes Service saw come and go). Each closes once the exchanges on it are answered (undici's
   * graceful `close`); until then `close()` can still destroy it at shutdown. Without this, every reload
   * that changes an upstream left its keep-alive connections open for good.
   *
   * The APIs of the config replaced keep their exchanges still on their way upstream (on the rule set
   * they started on): their origins and pools are found again, and so one of them opens its origin
   * anew, which the next retirement closes. An HTTP/2 upstream (a gRPC API's) has no graceful close:
   * it stays, its connections closed once idle (`idleSessionMs`).
   */
  retireUnused(apis: readonly ApiConfig[]): void {
    const used = new Set<string>();
    for (const api of apis) {
      const configured = upstreamTargets(api.upstream);
      const pooled = typeof api.upstream !== 'string';
      for (const { origin, host } of resolvedTargets(configured, pooled ? this.addressesOf : noAddresses))
        used.add(originKey(api.protocol, origin, this.tlsOf(api.id, origin), host));
    }
    let retired = false;
    for (const [key, { pool }] of this.byKey) {
      if (used.has(key) || !(pool instanceof Pool)) continue;
      this.byKey.delete(key);
      this.retiring.add(pool);
      retired = true;
      void pool
        .close()
        .catch(() => undefined)
        .finally(() => this.retiring.delete(pool));
    }
    if (!retired) return;
    // A closed pool takes no exchange (UND_ERR_CLOSED): the replaced APIs find their origins again.
    this.byApi = new WeakMap();
    this.pools = new WeakMap();
  }

  /**
   * The targets of `apis` (the config in force) and what this gateway knows of them now: their health,
   * their exchanges in flight, and what was sent to them. Counts of targets no longer configured are
   * dropped.
   */
  states(apis: readonly ApiConfig[]): ApiUpstream[] {
    const kept = new Map<string, TargetCounts>();
    const states = apis.map((api) => {
      const pooled = typeof api.upstream !== 'string';
      const configured = upstreamTargets(api.upstream);
      const resolved = resolvedTargets(configured, pooled ? this.addressesOf : noAddresses);
      const targets = resolved.map(({ url, origin, host, weight }) => {
        const counts = pooled ? this.countsOf(api.id, origin) : noCounts;
        const standing = pooled ? this.standingOf(api.id, origin) : null;
        if (pooled) kept.set(countsKey(api.id, origin), counts);
        const inFlightNow = this.byKey.get(originKey(api.protocol, origin, this.tlsOf(api.id, origin), host));
        return {
          url,
          host,
          weight,
          healthy: this.healthOf(api.id, origin).healthy,
          ejected: standing?.ejected ?? false,
          ejections: standing?.ejections ?? 0,
          inFlight: inFlightNow === undefined ? 0 : inFlight(inFlightNow),
          ...counts,
        };
      });
      return {
        api: api.id,
        name: api.name,
        balance: typeof api.upstream === 'string' ? null : api.upstream.balance,
        healthCheck: typeof api.upstream !== 'string' && api.upstream.healthCheck !== undefined,
        targets,
      };
    });
    this.counts = kept;
    return states;
  }

  /** Closes the upstream connections; call after the last exchange. */
  async close(): Promise<void> {
    const pools = [...this.byKey.values()].map(({ pool }) => pool.destroy());
    for (const pool of this.retiring) pools.push(pool.destroy());
    this.byKey.clear();
    this.byApi = new WeakMap();
    this.pools = new WeakMap();
    await Promise.all(pools);
  }

  private countsOf(apiId: string, origin: string): TargetCounts {
    const key = countsKey(apiId, origin);
    let counts = this.counts.get(key);
    if (counts === undefined) this.counts.set(key, (counts = { requests: 0, failures: 0, retries: 0 }));
    return counts;
  }

  /**
   * The origin of `upstreamOrigin` for API `apiId` of `protocol`, opened when none is yet: shared with
   * the APIs of the same protocol whose TLS to it is the same. `host` is the name's host when
   * `upstreamOrigin` is an address it resolved to, else null.
   */
  private origin(
    protocol: CompiledApi['config']['protocol'],
    upstreamOrigin: string,
    apiId: string,
    host: string | null,
  ): Origin {
    const tls = this.tlsOf(apiId, upstreamOrigin);
    const key = originKey(protocol, upstreamOrigin, tls, host);
    const known = this.byKey.get(key);
    if (known) return known;
    const origin = this.open(protocol, upstreamOrigin, tls, host ?? new URL(upstreamOrigin).host);
    this.byKey.set(key, origin);
    return origin;
  }

  private open(
    protocol: CompiledApi['config']['protocol'],
    upstreamOrigin: string,
    tls: UpstreamTls | null,
    host: string,
  ): Origin {
    const target = new URL(upstreamOrigin);
    const connectTimeout = this.connectTimeout();
    // One connection per exchange in flight, kept alive between them (as long as the upstream's
    // Keep-Alive says, 4 s without one), answers read one at a time (no pipelining); TLS verified.
    const pool =
      protocol === 'grpc'
        ? new Http2Upstream(upstreamOrigin, connectTimeout, this.timers, tls?.options, host)
        : new Pool(upstreamOrigin, {
            pipelining: 1,
            ...(tls ? { connect: upstreamConnector(tls, connectTimeout) } : { connectTimeout }),
          });
    // `toProxy`: the upgrade's target goes as the gateway routed it, not parsed again as a URL.
    const server = createProxyServer({
      target,
      selfHandleResponse: true,
      xfwd: false,
      toProxy: true,
      ...(tls ? { agent: webSocketAgent(tls) } : {}),
    });
    const openWebSocket = followWebSocketOpenings(server, this.use.webSocketSteps);
    const origin: Origin = { server, pool, host, openWebSocket, ...tryTargetOf(target) };
    sendFirst(server, (req) => this.use.send(req, origin));
    // Errors of a WebSocket's exchange come to its steps' `failed`; this one hears those of its client socket.
    server.on('error', () => undefined);
    return origin;
  }
}

/** What the client span of a try to `target` says of its server, made once per origin. */
function tryTargetOf(target: URL): TryTarget {
  const address = target.hostname.startsWith('[') ? target.hostname.slice(1, -1) : target.hostname;
  const port = target.port === '' ? (target.protocol === 'https:' ? 443 : 80) : Number(target.port);
  return { url: target.origin, address, port };
}

const countsKey = (apiId: string, origin: string) => `${apiId} ${origin}`;

/**
 * The key an origin is shared by: its protocol, its URL, the identity of its TLS settings, and for an
 * address, the name it was resolved from (each name has its own Host).
 */
const originKey = (protocol: string, origin: string, tls: UpstreamTls | null, host: string | null) =>
  `${protocol} ${origin}${tls === null ? '' : ` tls=${tls.identity}`}${host === null ? '' : ` host=${host}`}`;

/** The one-URL form counts nothing per target: its exchanges are `quotagate_requests_total`'s. */
const noCounts: Readonly<TargetCounts> = { requests: 0, failures: 0, retries: 0 };

/** Exchanges in flight to `origin`: sent, waiting for a connection, or queued. */
function inFlight(origin: Origin): number {
  if (origin.pool instanceof Http2Upstream) return origin.pool.inFlight();
  if (!(origin.pool instanceof Pool)) return 0;
  const { running, pending, queued } = origin.pool.stats;
  return running + pending + queued;
}
