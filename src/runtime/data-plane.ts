import http, { type Server } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { LiveConfig } from './config/live-config.js';
import { defaultCommandTimeoutMs } from './config/schema.js';
import type { LoadedConfig } from './config/load-config.js';
import { ApplicationDirectory } from './applications/application-directory.js';
import type { ApplicationRepository } from './applications/application-repository.js';
import { openApplicationRepository } from './stores/open-application-repository.js';
import { DataPlane } from './gateway/rule-set.js';
import { Gateway } from './gateway/gateway.js';
import { openAccessLog } from './observe/access-log.js';
import { AddedLatency, type EncodedLatency } from './observe/added-latency.js';
import type { LogSecrets, Logger } from './observe/log.js';
import type { ReadinessCheck } from './observe/readiness.js';
import type { DataPlaneAddress } from './gateway/data-plane-address.js';
import { httpServerOptions } from './gateway/http-server-options.js';
import { alpnProtocols, Http2Transport } from './gateway/edge/http2.js';
import { createMetrics, type Metrics } from './observe/metrics.js';
import { UpstreamProxy } from './upstream/upstream-proxy.js';
import { ConfigReloader, type ReloadOutcome } from './reload/config-reloader.js';
import { planStoreChanges } from './reload/store-changes.js';
import { readForReload, type ConfigSource } from './reload/config-source.js';
import { fixedSettingsOf } from './reload/fixed-settings.js';
import { secretValues } from './kit/secret-redaction.js';
import { readTlsFiles } from './kit/tls-files.js';
import type { CounterUsage } from './limiter/counter-store.js';
import { listenError } from './kit/listen-errors.js';
import { Limiter } from './limiter/limiter.js';
import { MemoryCounterStore } from './limiter/memory-counter-store.js';
import { FleetHeartbeat } from './stores/fleet-heartbeat.js';
import { RedisCounterTrips } from './stores/redis-counter-trips.js';
import { FleetRejections } from './stores/fleet-rejections.js';
import type { RestrictionRejections } from './observe/rejection-history.js';
import { SharedCounterStore } from './limiter/shared-counter-store.js';
import { systemClock, type Clock } from './kit/clock.js';
import { openQuotaRepository } from './stores/open-quota-repository.js';
import { QuotaIndex } from './quota/quota-index.js';
import type { QuotaRepository } from './quota/quota-repository.js';
import { openStoreRedis, redisAnswers } from './redis/connect-redis.js';
import type { QuotaDefinitions, WorkerRole } from './worker-role.js';

export interface RunningGateway {
  /** Bound ports: useful when the config asked for port 0. No `http` with `port: false`, no `https` without `tls`. */
  ports: DataPlaneAddress & { admin: number };
  /** Graceful shutdown: stop accepting, let in-flight requests finish within `shutdownTimeout`, close all. */
  close(): Promise<void>;
  /** This process's metrics (a worker's, for its primary to aggregate). */
  metrics: Metrics;
  /**
   * Reads conf/ again and puts it in force for the requests that come next (SIGHUP, `gateway reload`);
   * a config with mistakes is refused whole. Never rejects.
   */
  reload(): Promise<ReloadOutcome>;
  /** Hands the access lines gathered so far to their destination. */
  flushLogs(): void;
  /** Flushes the access lines, and opens `accessLog.file` again after logrotate moved it (SIGUSR2). */
  reopenLogs(): void;
}

/** A gateway that serves the data plane itself (one process, or a worker of `workers: N`). */
export interface ServingGateway extends RunningGateway {
  /** The time this process added to exchanges, for its primary to add up. */
  latency(): EncodedLatency;
  /**
   * A worker's part of a quota's rejection history, for its primary to add up: all of it with the
   * memory store; with Redis, nothing (it hands its history over to the fleet's store first).
   */
  rejectionsOf(quotaId: string): Promise<RestrictionRejections[]>;
  /** What the counters this process holds count under `keyPrefix` (the memory store of one data plane). */
  usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]>;
}

/**
 * What a control plane run in the same thread (`startGateway`, server.ts) is given of the data-plane host:
 * the host builds no admin listener itself, so that a data plane run apart (a worker, the data-plane
 * thread) holds none of the admin's libraries in its heap.
 */
export interface HostParts {
  live: LiveConfig;
  metrics: Metrics;
  readiness: ReadinessCheck[];
  isDraining(): boolean;
  gateway: Gateway;
  repository: QuotaRepository;
  applicationRepository: ApplicationRepository;
  quotas(): QuotaIndex;
  limiter: Limiter;
  latency: AddedLatency;
  rejectionsOf(quotaId: string, restrictions: number): Promise<RestrictionRejections[][]>;
  /** The data plane's ports, once it listens. */
  dataPlane(): DataPlaneAddress | null;
}

/** A control plane attached to the host: the host opens, reloads and closes it with the rest. */
export interface AttachedControlPlane {
  /** Opens its listener: the port it got. */
  listen(): Promise<number>;
  /**
   * Reads what a reload to `next` needs before anything changes (a certificate that cannot be read
   * refuses the reload), and returns what puts it in force.
   */
  prepareReload(next: LoadedConfig, kept: readonly string[]): () => void;
  close(): Promise<void>;
}

export interface StartOptions {
  logger: Logger;
  /** Folder that relative paths of the config (tls.key, store.file, APIKeyAuthPlugin) are resolved against. */
  cwd?: string;
  /** Where a reload reads the config; without it, a reload is refused. */
  source?: ConfigSource;
  /** The values the logger keeps out of its lines: a reload adds the new config's. */
  secrets?: LogSecrets;
  /** Clock for caches, in milliseconds (tests move it). */
  now?: () => number;
  /** Clock of the counters, memory or Redis, in milliseconds (tests move it; Redis keeps its own otherwise). */
  clock?: () => number;
  /**
   * Timers of the open exchanges' once-a-second tick, the JWKS fetch timeout, the shutdown's grace period
   * and HTTP/2 connections' idle, keepalive and request bounds (tests move them).
   */
  timers?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /**
   * Set in a worker process of `workers: N` (src/workers/): the primary owns the quota definitions, the
   * admin listener and, with the memory store, the counters; this process serves the data plane only.
   */
  worker?: WorkerRole;
}

/** Milliseconds the connections cut off at the end of a shutdown have to close before the log does. */
const closingGraceMs = 1_000;

/**
 * Opens a data-plane listener; a port that cannot be had is named with the settings that move it.
 * @param listener how messages name it (`the data plane's port`), and its settings (`port, or PORT`)
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

/** A data-plane server: the gateway decides, not Node, when a client waiting to send its body may. */
function dataServer(server: Server, gateway: Gateway): Server {
  server.on('request', gateway.handle);
  server.on('checkContinue', gateway.handleExpectingContinue);
  server.on('upgrade', gateway.handleUpgrade);
  return server;
}

/** The data plane's ports of `ports`, for the console's test requests. */
export function dataPlaneAddress(ports: RunningGateway['ports']): DataPlaneAddress {
  return {
    ...(ports.http === undefined ? {} : { http: ports.http }),
    ...(ports.https === undefined ? {} : { https: ports.https }),
  };
}

/**
 * Builds the data plane from the config and starts its listeners: with `attach`, in a process that owns
 * the quota definitions, the control plane `attach` builds (server.ts); with `options.worker`, a data
 * plane fed by its control plane in another thread or process.
 */
export async function startDataPlaneHost(
  loaded: LoadedConfig,
  options: StartOptions,
  attach?: (parts: HostParts) => Promise<AttachedControlPlane>,
): Promise<ServingGateway> {
  const { config } = loaded;
  const { logger, worker } = options;
  const cwd = options.cwd ?? process.cwd();
  const localCounters = new MemoryCounterStore({
    ...(options.clock ? { now: options.clock } : {}),
    maxBytes: config.store.maxCounterMemoryMb * 1_048_576,
    onFull: () => metrics.counterStoreFull.inc(),
    onShadowDropped: () => metrics.shadowCountsDropped.inc(),
  });
  const latency = new AddedLatency();
  const metrics = createMetrics({
    addedLatency: latency,
    counterMemoryBytes: () => localCounters.reserved,
    sharedCounters: config.store.type === 'redis' || Boolean(worker?.counters),
    ...(options.clock ? { now: options.clock } : {}),
  });
  const live = new LiveConfig(loaded);
  // Filled once the store is open; the authenticators read it on every request.
  const applications = new ApplicationDirectory();
  const authContext = {
    logger,
    cwd,
    applications,
    onJwksFetch: (result: 'ok' | 'failed') => metrics.jwksFetches.inc({ result }),
    ...(options.now ? { now: options.now } : {}),
    ...(options.timers ? { timers: options.timers } : {}),
  };
  const firstPlane = await DataPlane.build(loaded, authContext);
  const proxy = new UpstreamProxy({
    proxyTimeout: config.proxyTimeout,
    logger: logger.child({ component: 'proxy' }),
    latency,
    ...(options.timers ? { timers: options.timers } : {}),
    webSocket: {
      pingIntervalMs: config.server.webSocketPingInterval,
      maxFrameBytes: config.server.webSocketMaxFrame,
    },
    drainLimit: config.upstreamDrainLimit,
    onDrainCut: () => metrics.upstreamDrainsCut.inc(),
  });
  const readiness: ReadinessCheck[] = [];
  const redis = await openStoreRedis(config.store, logger);
  if (redis) readiness.push({ name: 'redis', ready: () => redisAnswers(redis) });

  let repository: QuotaRepository | null = null;
  let applicationRepository: ApplicationRepository | null = null;
  let definitions: QuotaDefinitions;
  if (worker) {
    definitions = worker.definitions;
    applications.follow(worker.applications);
  } else {
    try {
      definitions = repository = await openQuotaRepository(config, redis, { logger, cwd, declare: true });
      applicationRepository = await openApplicationRepository(config, redis, { logger, cwd });
    } catch (error) {
      await repository?.close();
      redis?.disconnect();
      throw error;
    }
    applications.follow(applicationRepository);
  }
  let quotas = new QuotaIndex(definitions.all());
  definitions.onChange((records) => {
    quotas = new QuotaIndex(records);
  });
  const shared = config.store.type === 'redis' ? config.store : null;
  let sharedTrips: RedisCounterTrips | null = null;
  const heartbeat =
    redis && shared
      ? new FleetHeartbeat(redis, shared.prefix, {
          clock: systemClock,
          onBeat: (live) => metrics.counterStoreLiveGateways.set(live),
          // Keeps this gateway's concurrency slots alive, and puts right a release that failed.
          keepAlive: async () => sharedTrips?.refreshSlots(),
        })
      : null;
  if (redis && shared && heartbeat) {
    const holder = { id: heartbeat.id, ttlMs: heartbeat.ttlMs };
    sharedTrips = new RedisCounterTrips(redis, shared.prefix, options.clock, holder);
  }
  await heartbeat?.start();
  const primaryCounters = worker?.counters ?? null;
  // Tests move the counters' clock; a gateway's shared counters otherwise keep the Redis server's.
  const sharedClock = options.clock ? { ...systemClock, now: options.clock } : systemClock;
  const limiter = new Limiter({
    shared:
      sharedTrips && heartbeat
        ? new SharedCounterStore({
            trips: sharedTrips,
            clock: sharedClock,
            live: () => heartbeat.live(),
            onTrip: () => metrics.counterStoreTrips.inc(),
            refreshSlots: () => sharedTrips.refreshSlots(),
          })
        : primaryCounters
          ? new SharedCounterStore({
              trips: primaryCounters.trips,
              clock: systemClock,
              live: primaryCounters.live,
              onTrip: () => metrics.counterStoreTrips.inc(),
            })
          : null,
    local: localCounters,
    onError: shared?.onError ?? 'local',
    timeoutMs: primaryCounters?.timeoutMs ?? shared?.commandTimeout ?? defaultCommandTimeoutMs,
    probe: () =>
      redis ? redisAnswers(redis) : primaryCounters ? primaryCounters.reachable() : Promise.resolve(true),
    ...(heartbeat ? { shareOf: (limit: number) => heartbeat.share(limit) } : {}),
    logger: logger.child({ component: 'limiter' }),
    metrics,
  });

  // With Redis, the console's rejection sparklines are the fleet's: this gateway hands its own over.
  const fleetRejections =
    redis && shared
      ? new FleetRejections(redis, shared.prefix, metrics.rejections, { clock: systemClock })
      : null;
  fleetRejections?.start();
  /** The rejections the admin listener adds up: the fleet's when it can reach them, else this process's. */
  const rejectionsOf = async (quotaId: string, restrictions: number) => {
    if (fleetRejections) {
      try {
        await fleetRejections.flush();
        return [await fleetRejections.ofQuota(quotaId, restrictions)];
      } catch {
        // Redis is away: this gateway's own history is what there is.
      }
    }
    return [metrics.rejections.ofQuota(quotaId)];
  };

  const accessLog = openAccessLog(config.accessLog, {
    logger,
    cwd,
    ...(options.secrets ? { secrets: options.secrets } : {}),
    sharesOutput: worker !== undefined,
    onDropped: (lines) => metrics.logLinesDropped.inc(lines),
  });
  const gateway = new Gateway({
    dataPlane: firstPlane,
    proxy,
    quotas: () => quotas,
    limiter,
    logger: logger.child({ component: 'gateway' }),
    accessLog,
    metrics,
    ...(options.clock ? { now: options.clock } : {}),
    ...(options.timers ? { timers: options.timers } : {}),
    ...(options.now ? { credentialsNow: options.now } : {}),
    credentialsGeneration: () => applications.generation,
    ...(heartbeat
      ? { liveGateways: () => heartbeat.live() }
      : primaryCounters
        ? { liveGateways: primaryCounters.live }
        : {}),
  });

  let draining = false;
  let ports: RunningGateway['ports'] | undefined;
  const admin =
    attach && repository && applicationRepository
      ? await attach({
          live,
          metrics,
          readiness,
          isDraining: () => draining,
          gateway,
          repository,
          applicationRepository,
          quotas: () => quotas,
          limiter,
          latency,
          rejectionsOf,
          dataPlane: () => (ports ? dataPlaneAddress(ports) : null),
        })
      : null;
  const plainServer = config.port === false ? null : http.createServer(httpServerOptions(config));
  const tlsServer = config.tls
    ? https.createServer({
        ...httpServerOptions(config),
        ...readTlsFiles(config.tls, cwd),
        ...(config.http2 ? { ALPNProtocols: alpnProtocols } : {}),
      })
    : null;
  const dataServers = [plainServer, tlsServer].flatMap((server) =>
    server ? [dataServer(server, gateway)] : [],
  );
  const http2 = config.http2
    ? new Http2Transport({
        onRequest: gateway.handle,
        onCheckContinue: gateway.handleExpectingContinue,
        limits: config.server,
        logger: logger.child({ component: 'http2' }),
        ...(options.now ? { now: options.now } : {}),
        ...(options.timers ? { timers: options.timers } : {}),
      })
    : null;
  if (http2 && plainServer) http2.acceptPriorKnowledge(plainServer);
  if (http2 && tlsServer) http2.acceptAlpn(tlsServer);

  const fixed = fixedSettingsOf(config);
  const reloader = new ConfigReloader({
    logger,
    metrics,
    async prepare() {
      const { loaded: next, kept } = await readForReload(options.source, fixed);
      // Read now, so that an unreadable certificate refuses the reload before anything changes.
      // A listener whose TLS the new config turns off keeps the certificate it serves (until a restart).
      const certificates =
        next.config.tls && tlsServer && !kept.includes('tls') ? readTlsFiles(next.config.tls, cwd) : null;
      const commitAdmin = admin?.prepareReload(next, kept);
      const stores = planStoreChanges(
        next,
        repository && applicationRepository
          ? { quotas: repository, applications: applicationRepository }
          : null,
      );
      const plane = await DataPlane.build(next, authContext);
      return {
        kept,
        async commit() {
          await stores.apply(logger);
          options.secrets?.add(secretValues({ ...next.extras, ...next.config }));
          if (certificates) tlsServer!.setSecureContext(certificates);
          commitAdmin?.();
          proxy.proxyTimeout = next.config.proxyTimeout;
          proxy.drains.limit = next.config.upstreamDrainLimit;
          // After logrotate has moved the file: the lines that follow go to a new one.
          if (accessLog) {
            accessLog.flushMs = next.config.accessLog.flushMs;
            accessLog.reopen();
          }
          gateway.swap(plane);
          live.replace(next);
        },
      };
    },
  });

  const closeResources = async () => {
    await admin?.close();
    // Answers still read for their units after their clients left are given up, and charged their
    // default, while the limiter can still count it.
    await proxy.close();
    // Unspent leases and measured bytes reach the fleet's counters before the connection closes.
    await limiter.close();
    await heartbeat?.stop();
    await fleetRejections?.stop();
    await localCounters.close();
    await definitions.close();
    await applicationRepository?.close();
    await gateway.dataPlane.close();
    accessLog?.close();
    if (redis) await redis.quit().catch(() => redis.disconnect());
  };

  try {
    const httpPort =
      plainServer && config.port !== false
        ? await listen(plainServer, config.port, config.host, {
            name: "the data plane's port",
            settings: 'port, or PORT,',
          })
        : undefined;
    const httpsPort =
      tlsServer && config.tls
        ? await listen(tlsServer, config.tls.port, config.tls.host ?? config.host, {
            name: "the data plane's HTTPS port",
            settings: 'tls.port',
          })
        : undefined;
    const adminPort = admin ? await admin.listen() : (worker?.adminPort ?? 0);
    ports = {
      ...(httpPort === undefined ? {} : { http: httpPort }),
      ...(httpsPort === undefined ? {} : { https: httpsPort }),
      admin: adminPort,
    };
  } catch (error) {
    for (const server of dataServers) server.close();
    http2?.closeAll();
    await closeResources();
    throw error;
  }
  logger.info(
    { ports, auth: config.APIKeyAuthType, store: config.store.type, apis: config.apis.length },
    worker ? 'worker started' : 'gateway started',
  );

  return {
    ports,
    metrics,
    latency: () => latency.encoded(),
    async rejectionsOf(quotaId) {
      if (!fleetRejections) return metrics.rejections.ofQuota(quotaId);
      await fleetRejections.flush();
      return [];
    },
    usage: (keyPrefix, windowMs) => limiter.usage(keyPrefix, windowMs),
    reload: () => reloader.reload(),
    flushLogs: () => accessLog?.flush(),
    reopenLogs: () => accessLog?.reopen(),
    async close() {
      draining = true;
      gateway.startDraining();
      for (const server of dataServers) {
        server.close();
        server.closeIdleConnections();
      }
      http2?.close();
      const { shutdownTimeout } = live.config;
      const idle = await gateway.waitForIdle(shutdownTimeout);
      if (!idle) logger.warn({ shutdownTimeout }, 'grace period over, closing open requests');
      gateway.endWebSockets();
      for (const server of dataServers) server.closeAllConnections();
      http2?.closeAll();
      // What was just cut off is accounted (its access line written) before the log closes.
      if (!idle) await gateway.waitForIdle(closingGraceMs);
      await closeResources();
      logger.info(worker ? 'worker stopped' : 'gateway stopped');
    },
  };
}
