import { createAuthenticator } from '../auth/create-authenticator.js';
import { compileCatalog } from '../catalog/router.js';
import { UsagePath } from '../gateway/usage-endpoint.js';
import { loadConfig, type LoadedConfig } from '../config/load-config.js';
import { LogSecrets, createLogger } from '../observe/log.js';
import { secretValues } from '../kit/secret-redaction.js';

/**
 * Loads the config of `configDir` and builds its authenticator exactly as `start` does (an auth plugin
 * is loaded and constructed, with the config).
 * @throws ConfigError listing every problem.
 */
export async function checkConfig(configDir: string): Promise<LoadedConfig> {
  const loaded = await loadConfig({ configDir });
  UsagePath.of(loaded.config.usagePath, compileCatalog(loaded.config.apis));
  const logger = createLogger({
    level: 'warn',
    destination: process.stderr,
    secrets: new LogSecrets(secretValues({ ...loaded.extras, ...loaded.config })),
  });
  const authenticator = await createAuthenticator(loaded, { logger, cwd: process.cwd() });
  await authenticator.close?.();
  return loaded;
}

/** The line that says a config is valid, and what it holds. */
export function configSummary({ config, environment }: LoadedConfig): string {
  return `config ok (${environment}): ${config.apis.length} APIs, ${config.applications.length} applications, APIKeyAuthType ${config.APIKeyAuthType}, store ${config.store.type}`;
}
