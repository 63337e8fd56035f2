import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError } from '../kit/config-error.js';

/** What the seed's plugin contract allows a plugin instance to offer; every method is optional. */
export interface AuthPlugin {
  matchURL?(req: unknown): boolean;
  validateRequest?(
    req: unknown,
    res: unknown,
    callback?: (error: unknown, passed?: boolean) => void,
  ): unknown;
  getSwaggerSecurity?(): { securityDefinitions: Record<string, unknown>; security: unknown[] };
  applyCredentialsForTest?(options: Record<string, unknown>): void;
  applyResponseForTest?(response: unknown, body: unknown): unknown;
  applyRequestsForTest?(response: unknown, body: unknown): unknown;
}

export interface AuthPluginClass {
  new (server: unknown): AuthPlugin;
  /** Top-level config keys the plugin reads (`static configKeys = ['secret']`): no other is accepted. */
  configKeys?: unknown;
}

const problem = (message: string) => new ConfigError([`APIKeyAuthPlugin: ${message}`]);

/** A path (`./plugins/x.js`, `/abs/x.js`) is taken relative to `cwd`; anything else is a package name. */
function resolvePlugin(spec: string, cwd: string): string {
  if (/^\.{0,2}\//.test(spec) || path.isAbsolute(spec)) return path.resolve(cwd, spec);
  return createRequire(path.join(cwd, 'package.json')).resolve(spec);
}

/**
 * Loads the plugin class named by `APIKeyAuthPlugin`: the module's default export or `module.exports`.
 * @throws ConfigError when it cannot be found or loaded, or exports no class with validateRequest.
 */
export async function loadAuthPlugin(spec: string, cwd: string): Promise<AuthPluginClass> {
  let module: { default?: unknown };
  try {
    module = (await import(pathToFileURL(resolvePlugin(spec, cwd)).href)) as { default?: unknown };
  } catch (error) {
    throw problem(`cannot load '${spec}': ${(error as Error).message.split('\n')[0]}`);
  }
  let candidate: unknown = module.default ?? module;
  if (typeof candidate !== 'function' && typeof (candidate as { default?: unknown }).default === 'function') {
    candidate = (candidate as { default: unknown }).default;
  }
  if (typeof candidate !== 'function') throw problem(`'${spec}' must export a plugin class`);
  if (typeof (candidate as { prototype?: AuthPlugin }).prototype?.validateRequest !== 'function') {
    throw problem(`'${spec}' has no validateRequest method, so it could not validate any request`);
  }
  return candidate as AuthPluginClass;
}
