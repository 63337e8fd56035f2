import type { ApplicationDirectory } from '../applications/application-directory.js';
import type { LoadedConfig } from '../config/load-config.js';
import type { AuthType } from '../config/schema.js';
import { systemClock, type Clock } from '../kit/clock.js';
import { ConfigError } from '../kit/config-error.js';
import type { Logger } from '../observe/log.js';
import { createApiKeyAuthenticator } from './apikey-authenticator.js';
import type { Authenticator } from './authenticator.js';
import { createBasicAuthenticator } from './basic-authenticator.js';
import { KeyRing } from './key-ring.js';
import { createNoneAuthenticator } from './none-authenticator.js';
import { createPluginAuthenticator } from './plugin-authenticator.js';
import { loadAuthPlugin } from '../config/plugin-loader.js';

export interface AuthenticatorContext {
  logger: Logger;
  /** The project folder: a plugin path is relative to it. */
  cwd: string;
  /** Clock for caches, in milliseconds (tests move it). */
  now?: () => number;
  /** Timers of the jwt scheme's JWKS fetch timeout (tests move them). */
  timers?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /** The applications made through the portal API, whose keys the key schemes accept too. */
  applications?: ApplicationDirectory;
  /**
   * The scheme is built to be checked, not to serve (`check-config`): it reaches no server (the jwt
   * scheme does not fetch its JWK Set).
   */
  offline?: boolean;
  /** Told of each fetch of the jwt scheme's JWK Set, for the metrics. */
  onJwksFetch?: (result: 'ok' | 'failed') => void;
}

/**
 * The authenticator of one scheme, from its top-level settings (the config check has made sure the
 * settings of every scheme the config names are there). A plugin is constructed here, before any listener
 * starts, with `{ config, logger }` as the seed's "server".
 * @param keys the key ring of the key schemes, shared when both basic and apikey are in use
 * @throws ConfigError when the scheme's settings are missing, or the plugin cannot be loaded or constructed.
 */
export async function createSchemeAuthenticator(
  scheme: AuthType,
  loaded: LoadedConfig,
  context: AuthenticatorContext,
  keys?: KeyRing,
): Promise<Authenticator> {
  const { config, environment } = loaded;
  const logger = context.logger.child({ component: 'auth' });
  const keyRing = () => keys ?? new KeyRing(config, environment, context.applications);
  switch (scheme) {
    case 'none':
      return createNoneAuthenticator();
    case 'basic':
      return createBasicAuthenticator(keyRing());
    case 'apikey':
      return createApiKeyAuthenticator(keyRing());
    // ldapts and jose are loaded by the schemes that use them only: a data plane's heap holds what it
    // runs (docs/performance.md).
    case 'ldap': {
      const { createLdapAuthenticator } = await import('./ldap-authenticator.js');
      return createLdapAuthenticator(required(config.ldap, 'ldap'), {
        logger,
        ...(context.now ? { now: context.now } : {}),
      });
    }
    case 'jwt': {
      const { createJwtAuthenticator } = await import('./jwt-authenticator.js');
      return createJwtAuthenticator(required(config.jwt, 'jwt'), {
        logger,
        clock: clockOf(context),
        fetchKeysAtStart: !context.offline,
        ...(context.onJwksFetch ? { onJwksFetch: context.onJwksFetch } : {}),
      });
    }
    case 'plugin': {
      const spec = required(config.APIKeyAuthPlugin, 'APIKeyAuthPlugin');
      const Plugin = await loadAuthPlugin(spec, context.cwd);
      const server = Object.freeze({
        config: Object.freeze({ ...loaded.extras, ...config }),
        logger: logger.child({ plugin: spec }),
      });
      let plugin;
      try {
        plugin = new Plugin(server);
      } catch (error) {
        throw new ConfigError([
          `APIKeyAuthPlugin: constructing '${spec}' failed: ${(error as Error).message}`,
        ]);
      }
      return createPluginAuthenticator(plugin, {
        timeout: config.pluginTimeout,
        logger: logger.child({ plugin: spec }),
      });
    }
  }
}

/** A scheme's settings, which a checked config has wherever the scheme is named. */
function required<T>(settings: T | undefined, key: string): T {
  if (settings === undefined) throw new ConfigError([`${key}: required by a scheme the config names`]);
  return settings;
}

/** The context's clock and timers as one clock, the system's where the context gives none. */
function clockOf({ now, timers = systemClock }: AuthenticatorContext): Clock {
  return {
    now: now ?? systemClock.now,
    monotonic: now ?? systemClock.monotonic,
    setTimeout: (callback, ms) => timers.setTimeout(callback, ms),
    clearTimeout: (timer) => timers.clearTimeout(timer),
  };
}
