import { storedResetsOf } from '../quota/quota-repository.js';
import {
  createOperationAuthenticators,
  directoryOf,
  type OperationAuthenticators,
} from '../auth/operation-authenticators.js';
import type { Authenticator } from '../auth/authenticator.js';
import { LiveConfig } from '../config/live-config.js';
import type { LoadedConfig } from '../config/load-config.js';
import type { DataPlaneAddress } from '../gateway/data-plane-address.js';
import { latencyReport } from '../observe/added-latency.js';
import { createMetrics, type Metrics } from '../observe/metrics.js';
import type { RejectionSource } from '../observe/rejection-history.js';
import { mergeUpstreams } from '../console/logic/upstreams.js';
import type { ConfigSource } from '../reload/config-source.js';
import { fixedSettingsOf, pinFixedSettings } from '../reload/fixed-settings.js';
import { readFleetRejections } from '../stores/fleet-rejections.js';
import { askWorkers } from '../workers/ask-workers.js';
import { clusterMetricsText, registerWorkerMetrics } from '../workers/cluster-metrics.js';
import { configFingerprint } from '../workers/config-fingerprint.js';
import { serveCounterTrips } from '../workers/ipc-counter-trips.js';
import { WorkerPool } from '../workers/worker-pool.js';
import { Closers } from './closers.js';
import { buildControlPlane } from './control-plane.js';
import { createPrimaryCounters, type PrimaryCounterStores } from './counter-stores.js';
import type { Env } from './env.js';
import { openStores, type OwnedStores, type Stores } from './open-stores.js';
import { createReloader } from './reload.js';
import { dataPlaneAddress, type RunningGateway } from './running-gateway.js';

export interface PrimaryOptions {
  /** Where a reload reads the config; without it, a reload is refused. */
  source?: ConfigSource;
  /**
   * Data planes to run: 2 or more are worker processes behind the shared ports (node:cluster); 1 is a
   * thread of this process, which holds the memory store's counters itself.
   */
  workers: number;
  /** The config folder, which the data-plane thread loads again (`workers: 1`). */
  configDir: string;
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
export async function startPrimary(
  loaded: LoadedConfig,
  env: Env,
  options: PrimaryOptions,
): Promise<RunningGateway> {
  const { config } = loaded;
  const role = { kind: 'primary', workers: options.workers } as const;
  const inThread = options.workers === 1;
  const closers = new Closers(env.logger);
  let counters: PrimaryCounterStores | null = null;
  const metrics = createMetrics({
    counterMemoryBytes: () => counters?.reserved() ?? 0,
    // Beside a data-plane thread, this loop only answers the admin port: the event-loop families are the
    // thread's. A primary of worker processes hands them their connections and may hold their counters.
    withoutEventLoopDelay: inThread,
  });
  const live = new LiveConfig(loaded);
  let draining = false;
  let ports: RunningGateway['ports'] | null = null;
  const stores = await openStores(loaded, role, env, closers);
  const owned = stores.owned!;
  let pool: WorkerPool | null = null;
  try {
    // Built here too: the admin listener documents the scheme, and a plugin that cannot be constructed
    // fails the start (or the reload) before any worker runs it.
    const scheme = await primaryAuthenticator(loaded, env, closers);
    // The data-plane thread's counters, while it listens (none while it is replaced after a crash).
    const threadUsage = (keyPrefix: string, windowMs: number) =>
      pool?.listeningPeers()[0]?.request('usage', { keyPrefix, windowMs }) ?? Promise.resolve([]);
    counters = createPrimaryCounters(config, role, { redis: stores.redis, metrics, threadUsage }, closers);
    const base = { live, metrics, stores, owned, counters };
    const fleet = createPool(loaded, env, options, base);
    const running = (pool = fleet.pool);
    const control = await primaryControlPlane(loaded, env, options, closers, {
      ...base,
      pool: running,
      authenticator: scheme.current,
      directory: scheme.directory,
      isDraining: () => draining,
      ports: () => ports && dataPlaneAddress(ports),
    });
    // The primary checks the config and builds its authenticator; then every worker reads the same files
    // and puts them in force itself (its keys, its plugin), refusing a config that changed meanwhile.
    const reloader = createReloader(loaded, env, {
      live,
      metrics,
      source: options.source,
      owned,
      steps: [scheme.prepareReload, control.prepareReload],
      async settled(next) {
        fleet.configChanged(next);
        await scheme.retire();
        await askReload(running, env, fleet.fingerprint());
      },
    });
    const admin = fleet.listensOn(await control.listen());
    ports = { ...(await running.start()), admin };
    // `gateway start` says `gateway started` once it has written its pid file, so that whoever reads the
    // line can run `gateway reload` at once.
    return {
      ports,
      metrics,
      reload: () => reloader.reload(),
      // The primary writes no access lines: its workers do.
      flushLogs: () => undefined,
      reopenLogs: () => running.broadcast('reopenLogs', null),
      async close() {
        draining = true;
        await closePrimary(running, closers, env, live.config.shutdownTimeout);
      },
    };
  } catch (error) {
    await pool?.drain(config.shutdownTimeout + drainGraceMs);
    await closers.close();
    throw error;
  }
}

/**
 * Drains every data plane (each runs its graceful close, with `drainGraceMs` beyond `shutdownTimeout` to
 * hand its leases back), then closes the rest; rejects when a worker had to be killed.
 */
async function closePrimary(pool: WorkerPool, closers: Closers, env: Env, shutdownTimeout: number) {
  const clean = await pool.drain(shutdownTimeout + drainGraceMs);
  await closers.close();
  env.logger.info('gateway stopped');
  if (!clean) throw new Error('a worker did not stop cleanly (see the log)');
}

/** What a primary's admin listener reads: its stores, its counters and its workers. */
interface PrimaryControlParts {
  live: LiveConfig;
  metrics: Metrics;
  stores: Stores;
  owned: OwnedStores;
  counters: PrimaryCounterStores;
  pool: WorkerPool;
  authenticator(): Authenticator;
  directory(): Authenticator | undefined;
  isDraining(): boolean;
  ports(): DataPlaneAddress | null;
}

/**
 * The admin listener of a primary: ready when every data plane listens; the usage of the counters where
 * they are; the rejections, added latency and metrics of every worker.
 */
function primaryControlPlane(
  loaded: LoadedConfig,
  env: Env,
  options: PrimaryOptions,
  closers: Closers,
  parts: PrimaryControlParts,
) {
  const { pool, metrics } = parts;
  return buildControlPlane(
    loaded,
    env,
    {
      live: parts.live,
      metrics,
      readiness: [
        ...parts.stores.readiness,
        { name: 'workers', ready: () => Promise.resolve(pool.listening === options.workers) },
      ],
      isDraining: parts.isDraining,
      owned: parts.owned,
      quotas: parts.stores.quotas,
      authenticator: parts.authenticator,
      directory: parts.directory,
      counters: parts.counters.usage,
      rejections: workerRejections(pool, parts.stores),
      metricsText: () =>
        clusterMetricsText(metrics.registry, pool.listeningPeers(), { sameProcess: options.workers === 1 }),
      latency: async () => latencyReport(await askWorkers(pool.listeningPeers(), 'latency', null)),
      dataPlane: parts.ports,
      upstreams: async () => mergeUpstreams(await askWorkers(pool.listeningPeers(), 'upstreams', null)),
      usageHistory: parts.stores.usageHistory,
    },
    closers,
  );
}

/** The parts of a primary its pool of data planes is fed from. */
interface PoolParts {
  stores: Stores;
  owned: OwnedStores;
  counters: PrimaryCounterStores;
  metrics: Metrics;
}

/**
 * The data planes of a primary, and what it welcomes them with: the config's fingerprint and fixed
 * settings, the quota definitions and applications (sent again after every change), the admin port, and
 * with the memory store and worker processes, the counters served over IPC.
 */
function createPool(loaded: LoadedConfig, env: Env, options: PrimaryOptions, parts: PoolParts) {
  const fixed = fixedSettingsOf(loaded.config);
  const { owned, counters } = parts;
  let fingerprint = configFingerprint(pinFixedSettings(fixed, loaded).loaded);
  let definitions = {
    generation: 0,
    records: owned.quotas.all(),
    resets: storedResetsOf(owned.quotas.resets()),
  };
  let applications = { generation: 0, records: owned.applications.all() };
  let adminPort = 0;
  const pool: WorkerPool = new WorkerPool({
    size: options.workers,
    home:
      options.workers === 1
        ? { kind: 'thread', data: { configDir: options.configDir } }
        : { kind: 'processes' },
    logger: env.logger,
    clock: env.fleetClock,
    welcome: () => ({
      fingerprint,
      fixed,
      definitions,
      applications,
      adminPort,
      workers: options.workers,
      primaryCounters: counters.trips !== null,
    }),
    serve: (worker, id) => {
      if (counters.trips) serveCounterTrips(worker, counters.trips, `worker ${id}`);
      const history = parts.stores.usageHistory;
      // A worker of a memory store sends its history lines here, to the file this process owns.
      if (history)
        worker.answer('usageHistory', async (rows) => {
          await history.add(rows);
          return null;
        });
    },
    onRestart: () => restarts.inc(),
  });
  const restarts = registerWorkerMetrics(parts.metrics.registry, () => pool.listening);
  owned.quotas.onChange((records) => {
    definitions = {
      generation: definitions.generation + 1,
      records,
      resets: storedResetsOf(owned.quotas.resets()),
    };
    pool.broadcast('definitions', definitions);
  });
  owned.applications.onChange((records) => {
    applications = { generation: applications.generation + 1, records };
    pool.broadcast('applications', applications);
  });
  return {
    pool,
    fingerprint: () => fingerprint,
    configChanged(next: LoadedConfig) {
      fingerprint = configFingerprint(next);
    },
    /** The admin listener's port, which the workers' welcome names. */
    listensOn(port: number) {
      adminPort = port;
      return port;
    },
  };
}

/**
 * The primary's authenticators: those in force, what a reload builds, and those it replaced. Every scheme
 * the config names is built, as a data plane builds them: a plugin named by one API only fails the start
 * here too, and an ldap scheme named by one API only still tells the admin listener what a name stands for.
 */
async function primaryAuthenticator(loaded: LoadedConfig, env: Env, closers: Closers) {
  const context = { logger: env.logger, cwd: env.cwd };
  let current = await createOperationAuthenticators(loaded, context);
  let previous: OperationAuthenticators | null = null;
  const closeAll = (authenticators: OperationAuthenticators) =>
    Promise.all(authenticators.schemes.map((scheme) => scheme.close?.())).then(() => undefined);
  closers.push('authenticator', () => closeAll(current));
  return {
    current: () => current.fallback,
    directory: () => directoryOf(current.schemes),
    async prepareReload(next: LoadedConfig) {
      const built = await createOperationAuthenticators(next, context);
      return () => {
        previous = current;
        current = built;
      };
    },
    /** Closes the authenticators a reload replaced. */
    async retire() {
      const retired = previous;
      previous = null;
      if (retired) await closeAll(retired);
    },
  };
}

/**
 * The rejections the admin listener adds up: the workers hand over what they hold first (with Redis),
 * then the fleet's lines are read.
 */
function workerRejections(pool: WorkerPool, stores: Stores): RejectionSource {
  const { redis } = stores;
  return async (quotaId, restrictions) => {
    const fromWorkers = await askWorkers(pool.listeningPeers(), 'rejections', { quotaId });
    const prefix = stores.redisPrefix;
    const fleet =
      redis && prefix !== null
        ? await readFleetRejections(redis, prefix, quotaId, restrictions).then(
            (lines) => [lines],
            () => [],
          )
        : [];
    return [...fleet, ...fromWorkers];
  };
}

/** Asks every worker to put the config of `fingerprint` in force; a refusal is logged. */
async function askReload(pool: WorkerPool, env: Env, fingerprint: string): Promise<void> {
  for (const reply of await pool.requestAll('reload', { fingerprint })) {
    const problems =
      'error' in reply ? [reply.error.message] : reply.answer.applied ? [] : reply.answer.problems;
    if (problems.length > 0)
      env.logger.error(
        { worker: reply.worker, problems },
        'a worker refused the reload: it runs the config it had',
      );
  }
}
