import type { LoadedConfig } from './config/load-config.js';
import { envOf, type StartOptions } from './runtime/env.js';
import type { ServingGateway } from './runtime/running-gateway.js';
import { startSingle } from './runtime/single.js';

export type { StartOptions } from './runtime/env.js';
export type { RunningGateway, ServingGateway } from './runtime/running-gateway.js';

/**
 * One gateway in one thread: the data plane and its admin listener side by side, with the quota
 * definitions and the counters in the same heap. It is what tests start (they move its clocks), and what
 * a program embedding quotagate runs; `gateway start` runs the admin listener apart from the data plane
 * (src/runtime/primary.ts), so that the data plane's heap holds none of the admin's libraries.
 */
export function startGateway(loaded: LoadedConfig, options: StartOptions): Promise<ServingGateway> {
  return startSingle(loaded, envOf(options), options.source);
}
