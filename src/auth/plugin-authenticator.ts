import type { IncomingMessage, ServerResponse } from 'node:http';
import { beforeDeadline, deadlinePassed } from '../kit/deadline.js';
import type { Logger } from '../observe/log.js';
import type { Authenticator, AuthResult, Principal } from './authenticator.js';
import type { AuthPlugin } from '../config/plugin-loader.js';
import { builtInSecurity } from './swagger-security.js';
import { credentialFieldValues, withoutValues } from '../kit/secret-redaction.js';

export interface PluginAuthenticatorOptions {
  /** Milliseconds a plugin has to decide before the request gets 503. */
  timeout: number;
  logger: Logger;
}

/** The id a plugin gave the caller: a non-empty string, or an object's id, username or name. */
function nameOf(value: unknown): string | undefined {
  if (typeof value === 'string' && value !== '') return value;
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Record<string, unknown>;
  return [record.id, record.username, record.name].find(
    (field): field is string => typeof field === 'string' && field !== '',
  );
}

/** The caller named by the plugin through `req.application` or `req.user`, so application quotas count per caller. */
function principalOf(req: IncomingMessage): Principal {
  const named = req as IncomingMessage & { application?: unknown; user?: unknown };
  const application = nameOf(named.application);
  const user = nameOf(named.user);
  const id = application ?? user;
  return id ? { subject: user ?? id, application: id } : { subject: 'plugin' };
}

/**
 * Runs validateRequest in whichever form the plugin implements: the callback form when the function
 * declares three parameters, else the synchronous form, whose result may also be a Promise.
 */
function validate(plugin: AuthPlugin, req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  const validateRequest = plugin.validateRequest!;
  return new Promise((resolve, reject) => {
    if (validateRequest.length >= 3) {
      validateRequest.call(plugin, req, res, (error: unknown, passed?: boolean) =>
        error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(passed === true),
      );
      return;
    }
    const result = validateRequest.call(plugin, req, res);
    if (result && typeof (result as PromiseLike<unknown>).then === 'function') {
      (result as PromiseLike<unknown>).then((passed) => resolve(passed === true), reject);
    } else {
      resolve(result === true);
    }
  });
}

/** Header fields the plugin's Swagger security says carry its credentials (`in: header`), lower case. */
function credentialFieldsOf(plugin: AuthPlugin): Set<string> {
  const definitions = plugin.getSwaggerSecurity?.()?.securityDefinitions ?? {};
  return new Set(
    Object.values(definitions).flatMap((definition) => {
      const { in: where, name } = (definition ?? {}) as { in?: unknown; name?: unknown };
      return where === 'header' && typeof name === 'string' ? [name.toLowerCase()] : [];
    }),
  );
}

/** The plugin's error with the request's credentials taken out of its text, which may quote them. */
function withoutRequestCredentials(error: unknown, req: IncomingMessage, fields: ReadonlySet<string>): Error {
  const source = error instanceof Error ? error : new Error(String(error));
  const values = credentialFieldValues(req.headers, fields);
  const copy = new Error(withoutValues(source.message, values));
  copy.name = source.name;
  copy.stack = source.stack === undefined ? undefined : withoutValues(source.stack, values);
  return copy;
}

const pluginRefused: AuthResult = Object.freeze({
  ok: false,
  reject: 'unauthorized',
  cause: 'plugin_refused',
});

/** `APIKeyAuthType: 'plugin'`: the seed's custom plugin contract around one plugin instance. */
export function createPluginAuthenticator(
  plugin: AuthPlugin,
  options: PluginAuthenticatorOptions,
): Authenticator {
  const { logger } = options;
  const credentialFields = credentialFieldsOf(plugin);
  const applyResponseForTest = plugin.applyResponseForTest ?? plugin.applyRequestsForTest;
  return {
    scheme: 'plugin',
    async authenticate(req, res, path): Promise<AuthResult> {
      // The seed's plugins match URLs on `req.url`: they are shown the routed path there, not another
      // spelling of it that the router normalized.
      req.url = path;
      try {
        if (plugin.matchURL && !plugin.matchURL(req)) {
          // The path only: a query may carry a key.
          logger.debug(
            { path: path.split('?', 1)[0] },
            'the plugin does not validate this URL: passing it unauthenticated',
          );
          return { ok: true, principal: null, unvalidated: true };
        }
        const passed = await beforeDeadline(validate(plugin, req, res), options.timeout);
        if (passed === deadlinePassed) {
          logger.error({ timeout: options.timeout }, 'the auth plugin did not answer in time');
          return { ok: false, reject: 'service_unavailable' };
        }
        return passed ? { ok: true, principal: principalOf(req) } : pluginRefused;
      } catch (error) {
        // The request's credential fields are taken out here; the logger takes out anything else that
        // looks like a credential, and the config's secrets.
        logger.error(
          { err: withoutRequestCredentials(error, req, credentialFields) },
          'the auth plugin failed',
        );
        return { ok: false, reject: 'internal_error' };
      }
    },
    documentation: {
      swaggerSecurity: () => plugin.getSwaggerSecurity?.() ?? builtInSecurity.none(),
      ...(plugin.applyCredentialsForTest
        ? { applyCredentialsForTest: (testOptions) => plugin.applyCredentialsForTest!(testOptions) }
        : {}),
      ...(applyResponseForTest
        ? { applyResponseForTest: (response, body) => applyResponseForTest.call(plugin, response, body) }
        : {}),
    },
  };
}
