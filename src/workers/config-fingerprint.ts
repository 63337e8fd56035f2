import { createHash } from 'node:crypto';
import type { LoadedConfig } from '../config/load-config.js';

/**
 * A digest of a loaded config, to tell whether a worker loaded the config its primary runs: a worker
 * started after conf/ was edited would otherwise serve another catalog, other keys, other upstreams.
 * A config that JSON cannot hold (a plugin's key holding a BigInt, say) has no fingerprint: ''.
 */
export function configFingerprint(loaded: LoadedConfig): string {
  try {
    const text = JSON.stringify([loaded.environment, loaded.config, loaded.extras]);
    return createHash('sha256').update(text).digest('hex');
  } catch {
    return '';
  }
}
