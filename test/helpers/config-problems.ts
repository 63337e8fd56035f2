import { loadConfig } from '../../src/config/load-config.js';
import { ConfigError } from '../../src/kit/config-error.js';

/** The directory of the bad-config fixture `name`. */
export const badConfig = (name: string) => `test/fixtures/bad-config/${name}`;

/**
 * The problems `loadConfig` reports of the config in `configDir`, with `env` as the environment.
 * @throws Error when it loads without a problem, or fails other than with a ConfigError
 */
export async function problemsOf(configDir: string, env: NodeJS.ProcessEnv = {}): Promise<readonly string[]> {
  try {
    await loadConfig({ configDir, env });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error(`${configDir} loaded without a problem`);
}
