import { ApplicationDirectory } from '../applications/application-directory.js';
import { LiveConfig } from '../config/live-config.js';
import type { LoadedConfig } from '../config/load-config.js';
import type { DataPlaneAddress } from '../gateway/data-plane-address.js';
import { AddedLatency } from '../observe/added-latency.js';
import { createMetrics, type Metrics } from '../observe/metrics.js';
import type { ConfigSource } from '../reload/config-source.js';
import { Closers } from './closers.js';
import { counterBackend, createCounterStores, type CounterStores } from './counter-stores.js';
import { buildDataPlane, type BuiltDataPlane } from './data-plane.js';
import type { Env } from './env.js';
import { createNotifications } from './notifications.js';
import { openStores, type Stores } from './open-stores.js';
import { createReloader, type PrepareStep } from './reload.js';
import type { Role } from './role.js';
import { dataPlaneAddress, type ServingGateway } from './running-gateway.js';

/** What a control plane run in the same thread is given of the data plane it serves beside (single.ts). */
export interface ServedParts {
  live: LiveConfig;
  metrics: Metrics;
  latency: AddedLatency;
  stores: Stores;
  counters: CounterStores;
  dataPlane: BuiltDataPlane;
  /** Where the control plane pushes its closer: after the data plane's, so that it closes before it. */
  closers: Closers;
  isDraining(): boolean;
  /** The data plane's ports, once it listens. */
  ports(): DataPlaneAddress | null;
}

/** A control plane attached to a serving process: its listener, and its share of a reload. */
export interface AttachedControlPlane {
  listen(): Promise<number>;
  prepareReload: PrepareStep;
}

/**
 * A process that serves the data plane itself: `single` (with the control plane `attach` builds) or a
 * `worker` (fed by its primary, without one). Builds its parts in dependency order (stores, counters,
 * data plane, control plane, listeners), drains explicitly, then closes them in reverse.
 */
export async function startServing(
  loaded: LoadedConfig,
  role: Extract<Role, { kind: 'single' | 'worker' }>,
  env: Env,
  source: ConfigSource | undefined,
  attach?: (served: ServedParts) => Promise<AttachedControlPlane>,
): Promise<ServingGateway> {
  const { config } = loaded;
  const { logger } = env;
  const closers = new Closers(logger);
  let counters: CounterStores | null = null;
  const latency = new AddedLatency();
  const metrics = createMetrics({
    addedLatency: latency,
    counterMemoryBytes: () => counters?.local.reserved ?? 0,
    sharedCounters: counterBackend(config, role) !== 'memory',
    ...(env.countersNow ? { now: env.countersNow } : {}),
  });
  const live = new LiveConfig(loaded);
  let draining = false;
  let ports: ServingGateway['ports'] | null = null;
  try {
    const stores = await openStores(loaded, role, env, closers);
    // The authenticators read it on every request.
    const applications = new ApplicationDirectory();
    applications.follow(stores.applications);
    counters = await createCounterStores(config, role, env, { redis: stores.redis, metrics }, closers);
    const { alerts } = createNotifications(live, stores.redis, env, metrics, closers);
    const dataPlane = await buildDataPlane(
      loaded,
      role,
      env,
      { metrics, latency, quotas: stores.quotas, applications, counters, alerts },
      closers,
    );
    const served = { live, metrics, latency, stores, counters, dataPlane, closers };
    const control = attach
      ? await attach({ ...served, isDraining: () => draining, ports: () => ports && dataPlaneAddress(ports) })
      : null;
    closers.push('listeners', () => dataPlane.stop());
    const reloader = createReloader(loaded, env, {
      live,
      metrics,
      source,
      owned: stores.owned,
      steps: [dataPlane.prepareReload, ...(control ? [control.prepareReload] : [])],
    });
    const address = await dataPlane.listen();
    const admin = control ? await control.listen() : role.kind === 'worker' ? role.feeds.adminPort : 0;
    ports = { ...address, admin };
    const { APIKeyAuthType: auth, store } = config;
    const worker = role.kind === 'worker';
    logger.info(
      { ports, auth, store: store.type, apis: config.apis.length },
      `${worker ? 'worker' : 'gateway'} started`,
    );
    const running = counters;
    return {
      ports,
      metrics,
      latency: () => latency.encoded(),
      rejectionsOf: (quotaId) => running.handOverRejections(quotaId),
      usage: (keyPrefix, windowMs) => running.limiter.usage(keyPrefix, windowMs),
      reload: () => reloader.reload(),
      upstreams: () => dataPlane.upstreams(),
      flushLogs: () => dataPlane.flushLogs(),
      reopenLogs: () => dataPlane.reopenLogs(),
      async close() {
        draining = true;
        await dataPlane.drain(live.config.shutdownTimeout);
        await closers.close();
        logger.info(`${worker ? 'worker' : 'gateway'} stopped`);
      },
    };
  } catch (error) {
    await closers.close();
    throw error;
  }
}
