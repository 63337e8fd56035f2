import cluster from 'node:cluster';
import type { StoredApplication } from '../applications/application-schema.js';
import type { LoadedConfig } from '../config/load-config.js';
import { ConfigError } from '../kit/config-error.js';
import { beforeDeadline, deadlinePassed } from '../kit/deadline.js';
import { exitCode } from '../kit/exit-codes.js';
import type { LogSecrets, Logger } from '../observe/log.js';
import type { ConfigSource } from '../reload/config-source.js';
import { pinFixedSettings } from '../reload/fixed-settings.js';
import { configFingerprint } from '../workers/config-fingerprint.js';
import { IpcPeer, primaryEndpoint } from '../workers/ipc-peer.js';
import { NumberedFeed } from '../workers/numbered-feed.js';
import { DefinitionsFeed } from '../workers/definitions-feed.js';
import { envOf } from './env.js';
import { dataPlaneAddress, type ServingGateway } from './running-gateway.js';
import { startServing } from './serving.js';

export interface WorkerOptions {
  logger: Logger;
  /** Where a reload reads the config: the files the primary reloaded. */
  source: ConfigSource;
  /** The values the logger keeps out of its lines: a reload adds the new config's. */
  secrets?: LogSecrets;
  /** The channel to the primary: a worker process's IPC, or the data-plane thread's parent port. */
  primary: IpcPeer;
  /** How the log names this data plane: its node:cluster worker id, or its thread id. */
  id: number | undefined;
  /**
   * A worker process hears SIGTERM and SIGINT itself; a thread of the primary's process hears no signal
   * (the primary drains it).
   */
  hearsSignals: boolean;
}

/** How long a starting worker waits for the primary's welcome. */
const welcomeTimeoutMs = 10_000;

/** A worker process of `workers: N` (`gateway start` run again by node:cluster): its primary is its parent. */
export function runWorkerProcess(
  loaded: LoadedConfig,
  options: Pick<WorkerOptions, 'logger' | 'source' | 'secrets'>,
): Promise<number> {
  const primary = new IpcPeer(primaryEndpoint());
  return runWorker(loaded, { ...options, primary, id: cluster.worker?.id, hearsSignals: true });
}

/**
 * Runs a data plane fed by its primary: a worker process of `workers: N`, on the ports every worker
 * shares, or the data-plane thread of `workers: 1`, whose heap holds none of the admin listener's libraries.
 * The quota definitions come from the primary (on start and after every change) and, with the memory
 * store and `workers: N`, so do the counters, through the lease protocol over IPC (the data-plane thread
 * holds its own, and answers the primary's usage questions); with Redis the worker is a gateway of
 * the fleet like any other. SIGTERM, SIGINT or the primary's `drain` run the gateway's graceful close.
 * @returns the exit code, once the gateway has closed
 */
export async function runWorker(started: LoadedConfig, options: WorkerOptions): Promise<number> {
  const logger = options.logger.child({ worker: options.id, pid: process.pid });
  const { primary } = options;
  const definitions = new DefinitionsFeed();
  primary.on('definitions', (records) => definitions.replace(records));
  const applications = new NumberedFeed<StoredApplication>();
  primary.on('applications', (records) => applications.replace(records));
  const stopping = stopOnRequest(logger, options);

  const welcome = await beforeDeadline(primary.request('hello', null), welcomeTimeoutMs);
  if (welcome === deadlinePassed) throw new Error(`the primary did not answer within ${welcomeTimeoutMs} ms`);
  // After a reload the primary keeps settings it cannot change live (its ports): so does this worker.
  const loaded = pinFixedSettings(welcome.fixed, started).loaded;
  if (welcome.fingerprint !== configFingerprint(loaded)) {
    throw new Error(
      'this worker loaded another config than the primary runs (conf/ changed since the gateway last loaded it); run gateway reload to apply it',
    );
  }
  definitions.replace(welcome.definitions);
  applications.replace(welcome.applications);
  // A reload puts in force only the config the primary reloaded: the files may have changed since.
  let reloading = welcome.fingerprint;
  const feeds = {
    definitions,
    applications,
    adminPort: welcome.adminPort,
    primary,
    primaryCounters: welcome.primaryCounters,
    workers: welcome.workers,
  };
  const source = {
    read: () => options.source.read(),
    verify(pinned: LoadedConfig) {
      if (configFingerprint(pinned) !== reloading)
        throw new ConfigError([
          'conf/ changed again while the gateway reloaded it: this worker keeps its config; reload again',
        ]);
    },
  };
  const env = envOf({ logger, ...(options.secrets ? { secrets: options.secrets } : {}) });
  const gateway = await startServing(loaded, { kind: 'worker', feeds }, env, source);
  primary.answer('reload', ({ fingerprint }) => {
    reloading = fingerprint;
    return gateway.reload();
  });
  answerPrimary(primary, gateway);
  return stopping.serve(gateway);
}

/** What the primary asks of a serving worker, answered from `gateway`; then it is told the worker listens. */
function answerPrimary(primary: IpcPeer, gateway: ServingGateway): void {
  primary.on('reopenLogs', () => gateway.reopenLogs());
  primary.answer('metrics', () => gateway.metrics.registry.getMetricsAsJSON());
  primary.answer('latency', () => gateway.latency());
  primary.answer('rejections', ({ quotaId }) => gateway.rejectionsOf(quotaId));
  primary.answer('usage', ({ keyPrefix, windowMs }) => gateway.usage(keyPrefix, windowMs));
  primary.answer('upstreams', () => gateway.upstreams());
  primary.notify('listening', dataPlaneAddress(gateway.ports));
}

/**
 * Stop requests, heard from the start: the primary drains workers that have said hello, and a signal may
 * come at any time. `serve` resolves with the exit code once the gateway has closed.
 */
function stopOnRequest(logger: Logger, options: WorkerOptions) {
  let running: ServingGateway | null = null;
  let stopRequested = false;
  let signals = 0;
  let finish: (code: number) => void = () => undefined;
  const finished = new Promise<number>((resolve) => (finish = resolve));
  const close = (gateway: ServingGateway) =>
    gateway.close().then(
      () => finish(exitCode.ok),
      (error: unknown) => {
        logger.error({ err: error }, 'worker shutdown failed');
        finish(exitCode.failure);
      },
    );
  const stop = (reason: string) => {
    if (stopRequested) return;
    stopRequested = true;
    logger.info({ reason }, 'worker draining');
    if (running) void close(running);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal, exiting at once');
      finish(exitCode.failure);
      return;
    }
    stop(signal);
  };
  if (options.hearsSignals) {
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    // The primary reloads the config and then asks its workers; a SIGHUP (or SIGUSR2) of the whole
    // process group is the primary's to act on.
    process.on('SIGHUP', () => logger.debug('SIGHUP left to the primary'));
    process.on('SIGUSR2', () => logger.debug('SIGUSR2 left to the primary'));
  }
  options.primary.on('drain', () => stop('drain'));
  return {
    serve(gateway: ServingGateway): Promise<number> {
      running = gateway;
      if (stopRequested) void close(gateway);
      return finished;
    },
  };
}
