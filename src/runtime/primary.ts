import { askWorkers } from './ask-workers.js';
import { createAdminServer, prepareAdminCertificates } from '../admin/admin-server.js';
import type { ReadinessCheck } from '../observe/readiness.js';
import { createAuthenticator } from '../auth/create-authenticator.js';
import { systemClock } from '../kit/clock.js';
import type { ApplicationRepository } from '../applications/application-repository.js';
import { openApplicationRepository } from '../stores/open-application-repository.js';
import { LiveConfig } from '../config/live-config.js';
import type { LoadedConfig } from '../config/load-config.js';
import type { CounterTrips } from '../limiter/counter-trips.js';
import { serveCounterTrips } from './ipc-counter-trips.js';
import { MemoryCounterStore } from '../limiter/memory-counter-store.js';
import { MemoryCounterTrips } from '../limiter/memory-counter-trips.js';
import { RedisCounterTrips } from '../stores/redis-counter-trips.js';
import { readFleetRejections } from '../stores/fleet-rejections.js';
import type { LogSecrets, Logger } from '../observe/log.js';
import { latencyReport } from '../observe/added-latency.js';
import { createMetrics } from '../observe/metrics.js';
import { openQuotaRepository } from '../stores/open-quota-repository.js';
import { QuotaIndex } from '../quota/quota-index.js';
import type { QuotaRepository } from '../quota/quota-repository.js';
import { quotaUsage } from '../quota/quota-usage.js';
import { openStoreRedis, redisAnswers } from '../redis/connect-redis.js';
import { ConfigReloader } from '../reload/config-reloader.js';
import { planStoreChanges } from '../reload/store-changes.js';
import { readForReload, type ConfigSource } from '../reload/config-source.js';
import { fixedSettingsOf, pinFixedSettings } from '../reload/fixed-settings.js';
import { secretValues } from '../kit/secret-redaction.js';
import { readTlsFiles } from '../kit/tls-files.js';
import { dataPlaneAddress, type RunningGateway } from '../data-plane-host.js';
import { listenAdmin } from '../server.js';
import { clusterMetricsText, registerWorkerMetrics } from './cluster-metrics.js';
import { configFingerprint } from './config-fingerprint.js';
import { WorkerPool } from './worker-pool.js';

export interface PrimaryOptions {
  logger: Logger;
  /** Where a reload reads the config; without it, a reload is refused. */
  source?: ConfigSource;
  /** The values the logger keeps out of its lines: a reload adds the new config's. */
  secrets?: LogSecrets;
  /**
   * Data planes to run: 2 or more are worker processes behind the shared ports (node:cluster); 1 is a
   * thread of this process, which holds the memory store's counters itself.
   */
  workers: number;
  /** The config folder, which the data-plane thread loads again (`workers: 1`). */
  configDir: string;
  /** Folder that relative paths of the config are resolved against. */
  cwd?: string;
}

/** What draining workers get beyond `shutdownTimeout`, to hand their leases back and close. */
const drainGraceMs = 5_000;

/**
 * Runs this process as the primary of `gateway start`. With `workers: N` (N > 1) it forks N workers
 * (node:cluster) that serve the data plane on the shared ports; with `workers: 1` it starts one
 * data-plane thread, which listens itself and holds the memory store's counters (its usage is asked of
 * it). It keeps what must exist once: the quota definitions (their repository: the
 * only writer of `store.file`), sent to every worker on start and after every change; the admin listener
 * (Quota API, health, readiness of every worker, the metrics of all processes); and with the memory store
 * the counters, which the workers reach with the lease protocol of the Redis store, so a limit holds for
 * all workers together. With Redis each worker reaches the counters itself.
 * A worker that exits is replaced after a backoff; `close` drains every worker (each runs its graceful
 * close) before the rest closes, and rejects when one had to be killed.
 */
export async function startPrimary(loaded: LoadedConfig, options: PrimaryOptions): Promise<RunningGateway> {
  const { config } = loaded;
  const { logger } = options;
  const cwd = options.cwd ?? process.cwd();
  const inThread = options.workers === 1;
  // With one data plane, in a thread, the counters are the thread's: no lease crosses threads.
  const counters =
    config.store.type === 'memory' && !inThread
      ? new MemoryCounterStore({
          maxBytes: config.store.maxCounterMemoryMb * 1_048_576,
          onFull: () => metrics.counterStoreFull.inc(),
          onShadowDropped: () => metrics.shadowCountsDropped.inc(),
        })
      : null;
  const metrics = createMetrics({
    counterMemoryBytes: () => counters?.reserved ?? 0,
    // Beside a data-plane thread, this loop only answers the admin port: the event-loop families are the
    // thread's. A primary of worker processes hands them their connections and may hold their counters.
    withoutEventLoopDelay: inThread,
  });
  // Built here too: the admin listener documents the scheme, and a plugin that cannot be constructed
  // fails the start (or the reload) before any worker runs it.
  let authenticator = await createAuthenticator(loaded, { logger, cwd });
  const live = new LiveConfig(loaded);
  const fixed = fixedSettingsOf(config);
  const readiness: ReadinessCheck[] = [];
  const redis = await openStoreRedis(config.store, logger);
  if (redis) readiness.push({ name: 'redis', ready: () => redisAnswers(redis) });
  let repository: QuotaRepository | null = null;
  let applicationRepository: ApplicationRepository;
  try {
    repository = await openQuotaRepository(config, redis, { logger, cwd, declare: true });
    applicationRepository = await openApplicationRepository(config, redis, { logger, cwd });
  } catch (error) {
    await repository?.close();
    redis?.disconnect();
    await authenticator.close?.();
    throw error;
  }
  const quotaRepository = repository;

  const memoryTrips = counters ? new MemoryCounterTrips(counters) : null;
  // The fleet's rejection history, which the workers hand theirs to (with Redis): read, never written here.
  const fleetLines = redis && config.store.type === 'redis' ? { redis, prefix: config.store.prefix } : null;
  // The admin listener's usage reads the counters where they are: here, or in Redis.
  const usageSource: Pick<CounterTrips, 'usage'> =
    memoryTrips ??
    (redis && config.store.type === 'redis'
      ? new RedisCounterTrips(redis, config.store.prefix)
      : { usage: (keyPrefix, windowMs) => threadUsage(keyPrefix, windowMs) });
  let fingerprint = configFingerprint(pinFixedSettings(fixed, loaded).loaded);
  let adminPort = 0;
  let definitions = { generation: 0, records: quotaRepository.all() };
  let applications = { generation: 0, records: applicationRepository.all() };
  const pool = new WorkerPool({
    size: options.workers,
    home: inThread ? { kind: 'thread', data: { configDir: options.configDir } } : { kind: 'processes' },
    logger,
    clock: systemClock,
    welcome: () => ({
      fingerprint,
      fixed,
      definitions,
      applications,
      adminPort,
      workers: options.workers,
      primaryCounters: counters !== null,
    }),
    serve: (worker, id) => {
      if (memoryTrips) serveCounterTrips(worker, memoryTrips, `worker ${id}`);
    },
    onRestart: () => restarts.inc(),
  });
  const restarts = registerWorkerMetrics(metrics.registry, () => pool.listening);
  /** The data-plane thread's counters, while it listens (none while it is replaced after a crash). */
  const threadUsage = async (keyPrefix: string, windowMs: number) => {
    const [thread] = pool.listeningPeers();
    return thread ? thread.request('usage', { keyPrefix, windowMs }) : [];
  };

  let quotas = new QuotaIndex(quotaRepository.all());
  quotaRepository.onChange((records) => {
    quotas = new QuotaIndex(records);
    definitions = { generation: definitions.generation + 1, records };
    pool.broadcast('definitions', definitions);
  });
  applicationRepository.onChange((records) => {
    applications = { generation: applications.generation + 1, records };
    pool.broadcast('applications', applications);
  });

  let draining = false;
  let ports: RunningGateway['ports'] | undefined;
  const admin = await createAdminServer({
    live,
    logger,
    metrics,
    readiness: [
      ...readiness,
      { name: 'workers', ready: () => Promise.resolve(pool.listening === options.workers) },
    ],
    isDraining: () => draining,
    authDocumentation: () => authenticator.documentation,
    identify: (name) => authenticator.identify?.(name),
    repository: quotaRepository,
    applicationRepository,
    usage: (quotaId) => quotaUsage(quotas, usageSource, quotaRepository, quotaId),
    rejections: async (quotaId, restrictions) => {
      // The workers hand over what they hold first (with Redis), then the fleet's lines are read.
      const fromWorkers = await askWorkers(pool.listeningPeers(), 'rejections', { quotaId });
      const fleet = fleetLines
        ? await readFleetRejections(fleetLines.redis, fleetLines.prefix, quotaId, restrictions).then(
            (lines) => [lines],
            () => [],
          )
        : [];
      return [...fleet, ...fromWorkers];
    },
    metricsText: () => clusterMetricsText(metrics.registry, pool.listeningPeers(), { sameProcess: inThread }),
    latency: async () => latencyReport(await askWorkers(pool.listeningPeers(), 'latency', null)),
    dataPlane: () => (ports ? dataPlaneAddress(ports) : null),
    ...(config.admin.tls ? { tls: readTlsFiles(config.admin.tls, cwd) } : {}),
  });

  // The primary checks the config and builds its authenticator; then every worker reads the same files
  // and puts them in force itself (its keys, its plugin), refusing a config that changed meanwhile.
  const reloader = new ConfigReloader({
    logger,
    metrics,
    async prepare() {
      const { loaded: next, kept } = await readForReload(options.source, fixed);
      const stores = planStoreChanges(next, { quotas: quotaRepository, applications: applicationRepository });
      const nextAuthenticator = await createAuthenticator(next, { logger, cwd });
      const commitAdminCertificates = prepareAdminCertificates(admin, next.config, kept, cwd);
      return {
        kept,
        async commit() {
          await stores.apply(logger);
          options.secrets?.add(secretValues({ ...next.extras, ...next.config }));
          commitAdminCertificates();
          const previous = authenticator;
          authenticator = nextAuthenticator;
          live.replace(next);
          fingerprint = configFingerprint(next);
          await previous.close?.();
          for (const reply of await pool.requestAll('reload', { fingerprint })) {
            const problems =
              'error' in reply ? [reply.error.message] : reply.answer.applied ? [] : reply.answer.problems;
            if (problems.length > 0)
              logger.error(
                { worker: reply.worker, problems },
                'a worker refused the reload: it runs the config it had',
              );
          }
        },
      };
    },
  });

  const closeResources = async () => {
    await admin.close();
    await quotaRepository.close();
    await applicationRepository.close();
    await counters?.close();
    await authenticator.close?.();
    if (redis) await redis.quit().catch(() => redis.disconnect());
  };

  try {
    adminPort = await listenAdmin(admin, config);
    ports = { ...(await pool.start()), admin: adminPort };
  } catch (error) {
    await pool.drain(config.shutdownTimeout + drainGraceMs);
    await closeResources();
    throw error;
  }
  // `gateway start` says `gateway started` once it has written its pid file, so that whoever reads the
  // line can run `gateway reload` at once.

  return {
    ports,
    metrics,
    reload: () => reloader.reload(),
    // The primary writes no access lines: its workers do.
    flushLogs: () => undefined,
    reopenLogs: () => pool.broadcast('reopenLogs', null),
    async close() {
      draining = true;
      const clean = await pool.drain(live.config.shutdownTimeout + drainGraceMs);
      await closeResources();
      logger.info('gateway stopped');
      if (!clean) throw new Error('a worker did not stop cleanly (see the log)');
    },
  };
}
