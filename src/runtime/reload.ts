import type { LiveConfig } from '../config/live-config.js';
import type { LoadedConfig } from '../config/load-config.js';
import { secretValues } from '../kit/secret-redaction.js';
import type { Metrics } from '../observe/metrics.js';
import { ConfigReloader } from '../reload/config-reloader.js';
import { readForReload, type ConfigSource } from '../reload/config-source.js';
import { fixedSettingsOf } from '../reload/fixed-settings.js';
import { planStoreChanges } from '../reload/store-changes.js';
import type { Env } from './env.js';
import type { OwnedStores } from './open-stores.js';

/** Puts one part's share of a reload in force; prepared before anything changes. */
export type Commit = () => void | Promise<void>;

/** Reads and builds what one part needs of the config `next` (it may refuse it); returns its commit. */
export type PrepareStep = (next: LoadedConfig, kept: readonly string[]) => Commit | Promise<Commit>;

export interface ReloadParts {
  live: LiveConfig;
  metrics: Pick<Metrics, 'configReloads' | 'configLastReloadSuccessful'>;
  /** Where a reload reads the config; without it, a reload is refused. */
  source: ConfigSource | undefined;
  /** The stores conf/'s declared quotas and plans are written to, in a process that owns them. */
  owned: OwnedStores | null;
  /** Each part's preparation, in the order their commits run. */
  steps: readonly PrepareStep[];
  /** Runs once the new config is in force (a primary tells its workers). */
  settled?: (next: LoadedConfig) => Promise<void>;
}

/**
 * The reload of a process, and its commit order: everything that can fail is read and built first (the
 * stores' plan, each part's step); then the stores are written, the new secrets kept out of the log,
 * each part's commit runs in the order of `steps`, and only then is the config in force (`live`).
 */
export function createReloader(loaded: LoadedConfig, env: Env, parts: ReloadParts): ConfigReloader {
  const fixed = fixedSettingsOf(loaded.config);
  const { logger } = env;
  return new ConfigReloader({
    logger,
    metrics: parts.metrics,
    async prepare() {
      const { loaded: next, kept } = await readForReload(parts.source, fixed);
      const stores = planStoreChanges(next, parts.owned);
      const commits: Commit[] = [];
      for (const step of parts.steps) commits.push(await step(next, kept));
      return {
        kept,
        async commit() {
          await stores.apply(logger);
          env.secrets?.add(secretValues({ ...next.extras, ...next.config }));
          for (const commit of commits) await commit();
          parts.live.replace(next);
          await parts.settled?.(next);
        },
      };
    },
  });
}
