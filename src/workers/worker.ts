import cluster from 'node:cluster';
import { exitCode } from '../commands/command.js';
import type { LoadedConfig } from '../config/load-config.js';
import { beforeDeadline, deadlinePassed } from '../deadline.js';
import { IpcCounterTrips } from '../limiter/ipc-counter-trips.js';
import type { Logger } from '../log.js';
import { startGateway, type RunningGateway } from '../server.js';
import { configFingerprint } from './config-fingerprint.js';
import { DefinitionsFeed } from './definitions-feed.js';
import { IpcPeer, primaryEndpoint } from './ipc-peer.js';
import type { PrimaryCounters } from './worker-role.js';

export interface WorkerOptions {
  logger: Logger;
}

/** How long a starting worker waits for the primary's welcome. */
const welcomeTimeoutMs = 10_000;
/**
 * Milliseconds a decision of the primary's counters may take before the limiter asks whether the primary
 * is still there; it is, while the channel is open, so a busy primary is waited for, never bypassed.
 */
const primaryDecisionMs = 1_000;

/**
 * Runs this process as a worker of `workers: N`: the data plane only, on the ports every worker shares.
 * The quota definitions come from the primary (on start and after every change) and, with the memory
 * store, so do the counters, through the lease protocol over IPC; with Redis the worker is a gateway of
 * the fleet like any other. SIGTERM, SIGINT or the primary's `drain` run the gateway's graceful close.
 * @returns the exit code, once the gateway has closed
 */
export async function runWorker(loaded: LoadedConfig, options: WorkerOptions): Promise<number> {
  const logger = options.logger.child({ worker: cluster.worker?.id, pid: process.pid });
  const primary = new IpcPeer(primaryEndpoint());
  const definitions = new DefinitionsFeed();
  primary.on('definitions', (records) => definitions.replace(records));

  // Stop requests are heard from the start: the primary drains workers that have said hello, and a
  // signal may come at any time.
  let running: RunningGateway | null = null;
  let stopRequested = false;
  let signals = 0;
  let finish: (code: number) => void = () => undefined;
  const finished = new Promise<number>((resolve) => (finish = resolve));
  const stop = (reason: string) => {
    if (stopRequested) return;
    stopRequested = true;
    logger.info({ reason }, 'worker draining');
    if (running) close(running);
  };
  const close = (gateway: RunningGateway) =>
    gateway.close().then(
      () => finish(exitCode.ok),
      (error: unknown) => {
        logger.error({ err: error }, 'worker shutdown failed');
        finish(exitCode.failure);
      },
    );
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal, exiting at once');
      finish(exitCode.failure);
      return;
    }
    stop(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  primary.on('drain', () => stop('drain'));

  const welcome = await beforeDeadline(primary.request('hello', null), welcomeTimeoutMs);
  if (welcome === deadlinePassed) throw new Error(`the primary did not answer within ${welcomeTimeoutMs} ms`);
  if (welcome.fingerprint !== configFingerprint(loaded)) {
    throw new Error(
      'this worker loaded another config than the primary runs (conf/ changed since the gateway started); restart the gateway to apply it',
    );
  }
  definitions.replace(welcome.definitions);
  const counters: PrimaryCounters | null =
    loaded.config.store.type === 'memory'
      ? {
          trips: new IpcCounterTrips(primary),
          live: () => welcome.workers,
          reachable: () => Promise.resolve(primary.open),
          timeoutMs: primaryDecisionMs,
        }
      : null;
  running = await startGateway(loaded, {
    logger,
    worker: { definitions, adminPort: welcome.adminPort, counters },
  });
  const { metrics, ports } = running;
  primary.answer('metrics', () => metrics.registry.getMetricsAsJSON());
  primary.notify('listening', {
    http: ports.http,
    ...(ports.https === undefined ? {} : { https: ports.https }),
  });
  if (stopRequested) close(running);
  return finished;
}
