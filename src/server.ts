import { readFileSync } from 'node:fs';
import http, { type Server } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createAdminServer, type ReadinessCheck } from './admin/admin-server.js';
import { createAuthenticator } from './auth/create-authenticator.js';
import { compileCatalog } from './catalog/router.js';
import type { LoadedConfig } from './config/load-config.js';
import { Gateway } from './gateway.js';
import type { Logger } from './log.js';
import { httpServerOptions } from './http-server-options.js';
import { createMetrics, type Metrics } from './metrics.js';
import { TrustedPeers } from './proxy/trust-proxy.js';
import { UpstreamProxy } from './proxy/upstream-proxy.js';
import { Limiter } from './limiter/limiter.js';
import { MemoryCounterStore } from './limiter/memory-counter-store.js';
import { FleetHeartbeat } from './limiter/fleet-heartbeat.js';
import { RedisCounterTrips } from './limiter/redis-counter-trips.js';
import { SharedCounterStore } from './limiter/shared-counter-store.js';
import { systemClock } from './clock.js';
import { openQuotaRepository } from './quota/open-quota-repository.js';
import { QuotaIndex } from './quota/quota-index.js';
import type { QuotaRepository } from './quota/quota-repository.js';
import { quotaUsage } from './quota/quota-usage.js';
import { openStoreRedis, redisAnswers } from './redis/connect-redis.js';
import type { QuotaDefinitions, WorkerRole } from './workers/worker-role.js';

export interface RunningGateway {
  /** Bound ports: useful when the config asked for port 0. */
  ports: { http: number; https?: number; admin: number };
  /** Graceful shutdown: stop accepting, let in-flight requests finish within `shutdownTimeout`, close all. */
  close(): Promise<void>;
  /** This process's metrics (a worker's, for its primary to aggregate). */
  metrics: Metrics;
}

export interface StartOptions {
  logger: Logger;
  /** Folder that relative paths of the config (tls.key, store.file, APIKeyAuthPlugin) are resolved against. */
  cwd?: string;
  /** Clock for caches, in milliseconds (tests move it). */
  now?: () => number;
  /** Clock of the memory counter store, in milliseconds (tests move it). */
  clock?: () => number;
  /**
   * Set in a worker process of `workers: N` (src/workers/): the primary owns the quota definitions, the
   * admin listener and, with the memory store, the counters; this process serves the data plane only.
   */
  worker?: WorkerRole;
}

function listen(server: Server, port: number, host: string | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** A data-plane server: the gateway decides, not Node, when a client waiting to send its body may. */
function dataServer(server: Server, gateway: Gateway): Server {
  server.on('request', gateway.handle);
  server.on('checkContinue', gateway.handleExpectingContinue);
  return server;
}

/** Builds every part from the config and starts the data-plane and admin listeners. */
export async function startGateway(loaded: LoadedConfig, options: StartOptions): Promise<RunningGateway> {
  const { config } = loaded;
  const { logger, worker } = options;
  const cwd = options.cwd ?? process.cwd();
  const localCounters = new MemoryCounterStore({
    ...(options.clock ? { now: options.clock } : {}),
    maxBytes: config.store.maxCounterMemoryMb * 1_048_576,
    onFull: () => metrics.counterStoreFull.inc(),
  });
  const metrics = createMetrics({ counterMemoryBytes: () => localCounters.reserved });
  const authenticator = await createAuthenticator(loaded, {
    logger,
    cwd,
    ...(options.now ? { now: options.now } : {}),
  });
  const proxy = new UpstreamProxy({
    proxyTimeout: config.proxyTimeout,
    logger: logger.child({ component: 'proxy' }),
  });
  const readiness: ReadinessCheck[] = [];
  const redis = await openStoreRedis(config.store, logger);
  if (redis) readiness.push({ name: 'redis', ready: () => redisAnswers(redis) });

  let repository: QuotaRepository | null = null;
  let definitions: QuotaDefinitions;
  if (worker) definitions = worker.definitions;
  else {
    try {
      definitions = repository = await openQuotaRepository(config, redis, { logger, cwd });
    } catch (error) {
      redis?.disconnect();
      throw error;
    }
  }
  let quotas = new QuotaIndex(definitions.all());
  definitions.onChange((records) => {
    quotas = new QuotaIndex(records);
  });
  const heartbeat = redis
    ? new FleetHeartbeat(redis, config.store.prefix, {
        clock: systemClock,
        onBeat: (live) => metrics.counterStoreLiveGateways.set(live),
      })
    : null;
  await heartbeat?.start();
  const primaryCounters = worker?.counters ?? null;
  const limiter = new Limiter({
    shared:
      redis && heartbeat
        ? new SharedCounterStore({
            trips: new RedisCounterTrips(redis, config.store.prefix),
            clock: systemClock,
            live: () => heartbeat.live(),
            onTrip: () => metrics.counterStoreTrips.inc(),
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
    onError: config.store.onError,
    timeoutMs: primaryCounters?.timeoutMs ?? config.store.commandTimeout,
    probe: () =>
      redis ? redisAnswers(redis) : primaryCounters ? primaryCounters.reachable() : Promise.resolve(true),
    ...(heartbeat ? { shareOf: (limit: number) => heartbeat.share(limit) } : {}),
    logger: logger.child({ component: 'limiter' }),
    metrics,
  });

  const gateway = new Gateway({
    router: compileCatalog(config.apis),
    authenticator,
    proxy,
    trustedPeers: new TrustedPeers(config.trustProxy),
    forwardCredentials: config.forwardCredentials,
    quotas: () => quotas,
    limiter,
    // The access line is built from fields the gateway chose (ids, names, numbers), none a credential
    // field: it skips the root's redaction paths, whose wildcards re-serialized every field of every line
    // (a third of the CPU of a logged request). The config's secret values are still taken out of it.
    logger: logger.child({ component: 'access' }, { redact: [] }),
    metrics,
  });

  let draining = false;
  const admin = repository
    ? await createAdminServer({
        config,
        logger,
        metrics,
        readiness,
        isDraining: () => draining,
        authDocumentation: authenticator.documentation,
        repository,
        usage: (quotaId) => quotaUsage(quotas, limiter, repository, quotaId),
      })
    : null;
  const dataServers: Server[] = [dataServer(http.createServer(httpServerOptions(config)), gateway)];
  if (config.tls) {
    const read = (file: string) => readFileSync(path.resolve(cwd, file));
    const { key, cert, ca } = config.tls;
    dataServers.push(
      dataServer(
        https.createServer({
          ...httpServerOptions(config),
          key: read(key),
          cert: read(cert),
          ...(ca ? { ca: read(ca) } : {}),
        }),
        gateway,
      ),
    );
  }

  const closeResources = async () => {
    await admin?.close();
    // Unspent leases and measured bytes reach the fleet's counters before the connection closes.
    await limiter.close();
    await heartbeat?.stop();
    await localCounters.close();
    await definitions.close();
    proxy.close();
    await authenticator.close?.();
    if (redis) await redis.quit().catch(() => redis.disconnect());
  };

  let ports: RunningGateway['ports'];
  try {
    const httpPort = await listen(dataServers[0]!, config.port, config.host);
    const httpsPort = config.tls
      ? await listen(dataServers[1]!, config.tls.port, config.tls.host ?? config.host)
      : undefined;
    let adminPort = worker?.adminPort ?? 0;
    if (admin) {
      await admin.listen({ port: config.admin.port, host: config.admin.host });
      adminPort = (admin.server.address() as AddressInfo).port;
    }
    ports = { http: httpPort, admin: adminPort, ...(httpsPort === undefined ? {} : { https: httpsPort }) };
  } catch (error) {
    for (const server of dataServers) server.close();
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
    async close() {
      draining = true;
      gateway.startDraining();
      for (const server of dataServers) {
        server.close();
        server.closeIdleConnections();
      }
      const idle = await gateway.waitForIdle(config.shutdownTimeout);
      if (!idle)
        logger.warn({ shutdownTimeout: config.shutdownTimeout }, 'grace period over, closing open requests');
      for (const server of dataServers) server.closeAllConnections();
      await closeResources();
      logger.info(worker ? 'worker stopped' : 'gateway stopped');
    },
  };
}
