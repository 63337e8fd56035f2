import type { LoadedConfig } from '../config/load-config.js';
import { pinFixedSettings, type FixedSettings, type PinnedConfig } from './fixed-settings.js';

/** How a process reads its config again, for a reload. */
export interface ConfigSource {
  read(): Promise<LoadedConfig>;
  /**
   * Refuses a config read for a reload, after the running fixed settings are put into it.
   * @throws ConfigError saying why.
   */
  verify?(pinned: LoadedConfig): void;
}

/**
 * Reads the config again, with the running gateway's fixed settings put into it.
 * @throws ConfigError listing every mistake; Error when the process has no config folder to read.
 */
export async function readForReload(
  source: ConfigSource | undefined,
  fixed: FixedSettings,
): Promise<PinnedConfig> {
  if (!source) throw new Error('this gateway was started without a config folder to reload');
  const pinned = pinFixedSettings(fixed, await source.read());
  source.verify?.(pinned.loaded);
  return pinned;
}
