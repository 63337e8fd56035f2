import { createOperationAuthenticators } from '../auth/operation-authenticators.js';
import { schemesInUse } from '../config/cross-field-rules.js';
import { fetchJwks } from '../auth/jwks-keys.js';
import { systemClock } from '../kit/clock.js';
import { compileCatalog } from '../catalog/router.js';
import { UsagePath } from '../gateway/usage-endpoint.js';
import { loadConfig, type LoadedConfig } from '../config/load-config.js';
import { LogSecrets, createLogger } from '../observe/log.js';
import { secretValues } from '../kit/secret-redaction.js';

/**
 * Loads the config of `configDir` and builds its authenticator exactly as `start` does (an auth plugin
 * is loaded and constructed, with the config), without reaching any server: `onlineProblems` does that.
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
  // Every scheme an API or a method names is built, as `start` builds it.
  const { schemes } = await createOperationAuthenticators(loaded, {
    logger,
    cwd: process.cwd(),
    offline: true,
  });
  for (const authenticator of schemes) await authenticator.close?.();
  return loaded;
}

/** The line that says a config is valid, and what it holds. */
export function configSummary({ config, environment }: LoadedConfig): string {
  const others = [...schemesInUse(config).keys()].filter((scheme) => scheme !== config.APIKeyAuthType);
  const perOperation = others.length > 0 ? ` (APIs or methods: ${others.join(', ')})` : '';
  return `config ok (${environment}): ${config.apis.length} APIs, ${config.applications.length} applications, APIKeyAuthType ${config.APIKeyAuthType}${perOperation}, store ${config.store.type}`;
}

/** What `check-config --online` found: a line per server reached, and whether each answered as it should. */
export interface OnlineCheck {
  ok: boolean;
  line: string;
}

/**
 * Reaches the servers the config names, once each, as the gateway would: the jwt scheme's JWK Set
 * (fetched within `jwt.jwksTimeout`, its size bounded as at run time). The URL is not repeated (it may
 * carry credentials): the key path says which setting it is.
 */
export async function onlineChecks({ config }: LoadedConfig): Promise<OnlineCheck[]> {
  if (!schemesInUse(config).has('jwt') || !config.jwt?.jwksUri) return [];
  try {
    const { keys } = await fetchJwks(config.jwt.jwksUri, {
      clock: systemClock,
      timeoutMs: config.jwt.jwksTimeout,
    });
    const kids = keys.map((key) => key.kid ?? '(no kid)').join(', ');
    const count = `${keys.length} ${keys.length === 1 ? 'key' : 'keys'}`;
    return [{ ok: true, line: `jwt.jwksUri: the JWK Set has ${count}${kids ? `: ${kids}` : ''}` }];
  } catch (error) {
    return [{ ok: false, line: `jwt.jwksUri: cannot fetch the JWK Set: ${reasonOf(error)}` }];
  }
}

/** An error's message and its cause's (fetch says only "fetch failed"; its cause says ECONNREFUSED). */
function reasonOf(error: unknown): string {
  const { message, cause } = error as Error;
  return cause instanceof Error ? `${message} (${cause.message})` : message;
}
