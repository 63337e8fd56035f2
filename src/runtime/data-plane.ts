import http, { type Server } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { ApplicationDirectory } from '../applications/application-directory.js';
import type { LoadedConfig } from '../config/load-config.js';
import type { Clock } from '../kit/clock.js';
import type { DataPlaneAddress } from '../gateway/data-plane-address.js';
import { alpnProtocols, Http2Transport } from '../gateway/edge/http2.js';
import { Gateway } from '../gateway/pipeline.js';
import { httpServerOptions } from '../gateway/http-server-options.js';
import { RuleSet } from '../gateway/rule-set.js';
import { listenError } from '../kit/listen-errors.js';
import { readTlsFiles } from '../kit/tls-files.js';
import { openAccessLog } from '../observe/access-log.js';
import type { AddedLatency } from '../observe/added-latency.js';
import type { Metrics } from '../observe/metrics.js';
import type { ThresholdAlerts } from '../notifications/threshold-alerts.js';
import { registerTargetMetrics } from '../upstream/target-metrics.js';
import type { ApiUpstream } from '../console/logic/upstreams.js';
import type { QuotaIndex } from '../quota/quota-index.js';
import { UsageBook, UsageCalendar, UsageHistoryFlush, type UsageRow } from '../quota/usage-history.js';
import { UpstreamProxy } from '../upstream/upstream-proxy.js';
import { readUpstreamTls } from '../upstream/upstream-tls.js';
import type { Closers } from './closers.js';
import type { CounterStores } from './counter-stores.js';
import type { Env } from './env.js';
import type { Role } from './role.js';
import { openTracing } from './tracing.js';

/** Milliseconds the connections cut off at the end of a shutdown have to close before the log does. */
const closingGraceMs = 1_000;

/** What the data plane is built on: the parts built before it. */
export interface DataPlaneParts {
  metrics: Metrics;
  latency: AddedLatency;
  /** The quota definitions as compiled now. */
  quotas: () => QuotaIndex;
  /** The applications' keys, which the key schemes accept; filled from the stores. */
  applications: ApplicationDirectory;
  counters: Pick<CounterStores, 'limiter' | 'liveGateways'>;
  /** Where the usage history's lines go once a second: the store, or the primary that holds it. */
  writeUsage: (rows: readonly UsageRow[]) => Promise<void>;
  /** Watches admitted requests' counts for the alert thresholds of `notifications`. */
  alerts: ThresholdAlerts;
}

/** A built data plane: the gateway, its listeners, and how it drains and reloads. */
export interface BuiltDataPlane {
  gateway: Gateway;
  /** Opens the listeners: the ports they got. */
  listen(): Promise<DataPlaneAddress>;
  /**
   * Closes the listeners and cuts every connection: the role pushes it last (after the admin listener's),
   * so that it closes first, on a start that fails too.
   */
  stop(): void;
  /**
   * The drain, in its order: stop listening, wait until no request is in flight (nor an answer read
   * after its client left) within `shutdownTimeout`, end the WebSockets, close the connections, and give
   * what was cut off a moment to be accounted. The closers run only after it.
   */
  drain(shutdownTimeout: number): Promise<void>;
  /**
   * Reads what a reload to `next` needs before anything changes (an unreadable certificate refuses the
   * reload) and builds its rule set; returns what puts them in force.
   */
  prepareReload(next: LoadedConfig, kept: readonly string[]): Promise<() => void>;
  flushLogs(): void;
  reopenLogs(): void;
  /** The targets of the APIs in force and what this data plane knows of them now. */
  upstreams(): ApiUpstream[];
}

/**
 * Builds the data plane in dependency order: the access log, the upstream proxy, the rule set and the
 * gateway, then its listeners (HTTP, HTTPS, HTTP/2), which listen once `listen` is called and whose
 * closer (`stop`) the role pushes once the admin listener is built. The only place
 * a `Gateway`, an `UpstreamProxy`, an `Http2Transport` or a serving rule set is constructed. Nothing here
 * reaches admin/: a data plane run apart holds none of its libraries.
 */
export async function buildDataPlane(
  loaded: LoadedConfig,
  role: Role,
  env: Env,
  parts: DataPlaneParts,
  closers: Closers,
): Promise<BuiltDataPlane> {
  const { config } = loaded;
  const { logger, clock, cwd } = env;
  const { metrics } = parts;
  const gatewayClock = env.countersNow ? withNow(clock, env.countersNow) : clock;
  const shutdown = shutdownBudget(clock, config.shutdownTimeout);
  // First, so that it closes last: the spans of the exchanges the drain ends are still exported.
  const tracing = await openTracing(config.tracing, shutdown.left, env, metrics, closers);
  const usageBook = startUsageHistory(loaded, gatewayClock, parts.writeUsage, logger, closers);
  const accessLog = openDataPlaneLog(loaded, role, env, metrics, closers);
  const proxy = upstreamProxyOf(loaded, env, parts);
  // Answers still read for their units after their clients left are given up, and charged their
  // default, while the limiter (closed after it) can still count it.
  closers.push('upstream', () => proxy.close());
  proxy.watchTargets(config.apis, readUpstreamTls(config.apis, cwd));
  let apis = config.apis;
  const upstreams = () => proxy.targetStates(apis);
  registerTargetMetrics(metrics.registry, upstreams);
  const authContext = authContextOf(env, parts);
  const gateway = new Gateway({
    dataPlane: await RuleSet.build(loaded, authContext),
    proxy,
    quotas: parts.quotas,
    limiter: parts.counters.limiter,
    logger: logger.child({ component: 'gateway' }),
    accessLog,
    metrics,
    tracing,
    clock: gatewayClock,
    ...(usageBook ? { usageBook } : {}),
    credentialsNow: clock.now,
    credentialsGeneration: () => parts.applications.generation,
    ...(parts.counters.liveGateways ? { liveGateways: parts.counters.liveGateways } : {}),
    alerts: parts.alerts,
  });
  closers.push('rule set', () => gateway.dataPlane.close());
  const listeners = createListeners(loaded, env, gateway);
  return {
    gateway,
    listen: () => listeners.listen(),
    stop: () => listeners.stop(),
    drain(shutdownTimeout) {
      shutdown.begin(shutdownTimeout);
      return drain(gateway, listeners, logger, shutdownTimeout);
    },
    async prepareReload(next, kept) {
      // Read now, so that an unreadable certificate refuses the reload before anything changes.
      // A listener whose TLS the new config turns off keeps the certificate it serves (until a restart).
      const certificates =
        next.config.tls && listeners.tls && !kept.includes('tls') ? readTlsFiles(next.config.tls, cwd) : null;
      const upstreamTls = readUpstreamTls(next.config.apis, cwd);
      const plane = await RuleSet.build(next, authContext);
      return () => {
        if (certificates) listeners.tls!.setSecureContext(certificates);
        proxy.proxyTimeout = next.config.proxyTimeout;
        proxy.drains.limit = next.config.upstreamDrainLimit;
        proxy.watchTargets(next.config.apis, upstreamTls);
        apis = next.config.apis;
        // After logrotate has moved the file: the lines that follow go to a new one.
        if (accessLog) {
          accessLog.flushMs = next.config.accessLog.flushMs;
          accessLog.reopen();
        }
        gateway.swap(plane);
      };
    },
    flushLogs: () => accessLog?.flush(),
    reopenLogs: () => accessLog?.reopen(),
    upstreams,
  };
}

/** What the authenticators of a rule set are built with: the log, the applications, the clocks. */
function authContextOf(env: Env, parts: DataPlaneParts) {
  return {
    logger: env.logger,
    cwd: env.cwd,
    applications: parts.applications,
    onJwksFetch: (result: 'ok' | 'failed') => parts.metrics.jwksFetches.inc({ result }),
    now: env.clock.now,
    timers: env.clock,
  };
}

/** The upstream proxy: its connection pools, the answers it reads after their clients left. */
function upstreamProxyOf(loaded: LoadedConfig, env: Env, parts: DataPlaneParts): UpstreamProxy {
  const { config } = loaded;
  return new UpstreamProxy({
    proxyTimeout: config.proxyTimeout,
    logger: env.logger.child({ component: 'proxy' }),
    latency: parts.latency,
    timers: env.clock,
    webSocket: {
      pingIntervalMs: config.server.webSocketPingInterval,
      maxFrameBytes: config.server.webSocketMaxFrame,
    },
    drainLimit: config.upstreamDrainLimit,
    onDrainCut: () => parts.metrics.upstreamDrainsCut.inc(),
    resolveHost: env.resolveHost,
  });
}

/**
 * What a shutdown leaves of its `shutdownTimeout` once the drain is over, for the export of the spans
 * still waiting: the drain and the export end within it together (past it, a worker is killed, and a
 * service manager kills the process), but the export gets a second at least, for the spans of the
 * exchanges the grace period cut off. Before a drain began (a start that failed), the whole of it.
 */
function shutdownBudget(clock: Pick<Clock, 'monotonic'>, shutdownTimeout: number) {
  let began: { at: number; timeout: number } | null = null;
  return {
    begin: (timeout: number) => void (began = { at: clock.monotonic(), timeout }),
    left: () =>
      began === null
        ? shutdownTimeout
        : Math.max(closingGraceMs, began.timeout - (clock.monotonic() - began.at)),
  };
}

/** The drain of `BuiltDataPlane`, in its order. */
async function drain(
  gateway: Gateway,
  listeners: Listeners,
  logger: Env['logger'],
  shutdownTimeout: number,
): Promise<void> {
  gateway.startDraining();
  listeners.stopListening();
  const idle = await gateway.waitForIdle(shutdownTimeout);
  if (!idle) logger.warn({ shutdownTimeout }, 'grace period over, closing open requests');
  gateway.endWebSockets();
  listeners.stop();
  // What was just cut off is accounted (its access line written) before the log closes.
  if (!idle) await gateway.waitForIdle(closingGraceMs);
}

type Listeners = ReturnType<typeof createListeners>;

/** The data plane's listeners: built with the gateway, listening only once asked. */
function createListeners(loaded: LoadedConfig, env: Env, gateway: Gateway) {
  const { config } = loaded;
  const plain = config.port === false ? null : http.createServer(httpServerOptions(config));
  const tls = config.tls
    ? https.createServer({
        ...httpServerOptions(config),
        ...readTlsFiles(config.tls, env.cwd),
        ...(config.http2 ? { ALPNProtocols: alpnProtocols } : {}),
      })
    : null;
  const servers = [plain, tls].flatMap((server) => (server ? [dataServer(server, gateway)] : []));
  const http2 = config.http2
    ? new Http2Transport({
        onRequest: gateway.handle,
        onCheckContinue: gateway.handleExpectingContinue,
        limits: config.server,
        logger: env.logger.child({ component: 'http2' }),
        now: env.clock.now,
        timers: env.clock,
      })
    : null;
  if (http2 && plain) http2.acceptPriorKnowledge(plain);
  if (http2 && tls) http2.acceptAlpn(tls);
  return {
    tls,
    async listen(): Promise<DataPlaneAddress> {
      const httpPort =
        plain && config.port !== false
          ? await listen(plain, config.port, config.host, {
              name: "the data plane's port",
              settings: 'port, or PORT,',
            })
          : undefined;
      const httpsPort =
        tls && config.tls
          ? await listen(tls, config.tls.port, config.tls.host ?? config.host, {
              name: "the data plane's HTTPS port",
              settings: 'tls.port',
            })
          : undefined;
      return {
        ...(httpPort === undefined ? {} : { http: httpPort }),
        ...(httpsPort === undefined ? {} : { https: httpsPort }),
      };
    },
    /** No new connection; idle ones close, busy ones once their answer is written. */
    stopListening() {
      for (const server of servers) {
        server.close();
        server.closeIdleConnections();
      }
      http2?.close();
    },
    /** Every connection is cut. */
    stop() {
      for (const server of servers) {
        if (server.listening) server.close();
        server.closeAllConnections();
      }
      http2?.closeAll();
    },
  };
}

/** A data-plane server: the gateway decides, not Node, when a client waiting to send its body may. */
function dataServer(server: Server, gateway: Gateway): Server {
  server.on('request', gateway.handle);
  server.on('checkContinue', gateway.handleExpectingContinue);
  server.on('upgrade', gateway.handleUpgrade);
  return server;
}

/**
 * Opens a data-plane listener; a port that cannot be had is named with the settings that move it.
 * @param listener how messages name it (`the data plane's port`), and its settings (`port, or PORT,`)
 */
function listen(
  server: Server,
  port: number,
  host: string | undefined,
  listener: { name: string; settings: string },
): Promise<number> {
  return new Promise((resolve, reject) => {
    const failed = (error: Error) =>
      reject(listenError(error, `${listener.name} ${port}`, listener.settings));
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** The access log of the data plane, when the log level has it, closed after the upstream. */
function openDataPlaneLog(loaded: LoadedConfig, role: Role, env: Env, metrics: Metrics, closers: Closers) {
  const accessLog = openAccessLog(loaded.config.accessLog, {
    logger: env.logger,
    cwd: env.cwd,
    ...(env.secrets ? { secrets: env.secrets } : {}),
    sharesOutput: role.kind === 'worker',
    onDropped: (lines) => metrics.logLinesDropped.inc(lines),
  });
  if (accessLog) closers.push('access log', () => accessLog.close());
  return accessLog;
}

/**
 * The usage history's book and its flush, when the history is on: closed after the upstream (an answer
 * read after its client left adds its units on that close) and before the stores, so that a graceful
 * stop writes every line.
 */
function startUsageHistory(
  loaded: LoadedConfig,
  clock: Clock,
  write: DataPlaneParts['writeUsage'],
  logger: Env['logger'],
  closers: Closers,
): UsageBook | null {
  const { enabled, timeZone } = loaded.config.usageHistory;
  if (!enabled) return null;
  const book = new UsageBook(new UsageCalendar(timeZone), clock.now);
  const flush = new UsageHistoryFlush({
    book,
    write,
    timers: clock,
    onError: (error, rows) =>
      logger.error(
        { err: error, rows },
        'writing the usage history failed; its lines go with the next write',
      ),
  });
  closers.push('usage history flush', () => flush.close());
  return book;
}

/** `clock` reading the wall time from `now` (the counters' clock, which tests move apart). */
function withNow(clock: Clock, now: () => number): Clock {
  return {
    now,
    monotonic: () => clock.monotonic(),
    setTimeout: (callback, ms) => clock.setTimeout(callback, ms),
    clearTimeout: (timer) => clock.clearTimeout(timer),
  };
}
