import type { LoadedConfig } from '../config/load-config.js';
import { latencyReport } from '../observe/added-latency.js';
import { buildControlPlane } from './control-plane.js';
import type { Env } from './env.js';
import type { ConfigSource } from '../reload/config-source.js';
import type { ServingGateway } from './running-gateway.js';
import { startServing } from './serving.js';

/**
 * One gateway in one thread: the data plane and its admin listener side by side, with the quota
 * definitions and the counters in the same heap (`startGateway`: tests, embedding).
 */
export function startSingle(
  loaded: LoadedConfig,
  env: Env,
  source: ConfigSource | undefined,
): Promise<ServingGateway> {
  return startServing(loaded, { kind: 'single' }, env, source, async (served) =>
    buildControlPlane(
      loaded,
      env,
      {
        live: served.live,
        metrics: served.metrics,
        readiness: served.stores.readiness,
        isDraining: served.isDraining,
        owned: served.stores.owned!,
        quotas: served.stores.quotas,
        authenticator: () => served.dataPlane.gateway.dataPlane.authenticator,
        directory: () => served.dataPlane.gateway.dataPlane.directory,
        counters: served.counters.limiter,
        rejections: served.counters.rejectionsOf,
        latency: async () => latencyReport([served.latency.encoded()]),
        dataPlane: served.ports,
        upstreams: async () => served.dataPlane.upstreams(),
        usageHistory: served.stores.usageHistory,
      },
      served.closers,
    ),
  );
}
