import { availableParallelism } from 'node:os';
import type { Config } from '../config/schema.js';

/** The worker processes `workers` asks for: `auto` is one per CPU this process may use. */
export function workerCount(config: Pick<Config, 'workers'>): number {
  return config.workers === 'auto' ? availableParallelism() : config.workers;
}
