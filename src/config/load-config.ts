import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { loadAuthPlugin } from './plugin-loader.js';
import { ConfigError } from '../kit/config-error.js';
import type { Environment } from '../applications/application-schema.js';
import { crossFieldProblems, formatKeyPath, type KeyPath, type Problem } from './cross-field-rules.js';
import { findConfigFile, readConfigFile } from './read-config-file.js';
import {
  configSchema,
  knownTopLevelKeys,
  redisOnlyStoreKeys,
  schemeMeant,
  unknownAuthType,
  type Config,
} from './schema.js';
import { keysAt, unknownKeyMessage } from '../kit/key-suggestions.js';

export interface LoadConfigOptions {
  /** Folder holding default.(js|yaml) and the optional <NODE_ENV>.(js|yaml) overlay. */
  configDir: string;
  env?: NodeJS.ProcessEnv;
  /** Relative paths in messages and in the config (tls.key, store.file) are relative to this folder. */
  cwd?: string;
}

export interface LoadedConfig {
  config: Readonly<Config>;
  environment: Environment;
  /** Top-level keys the auth plugin declares (its `static configKeys`), and their values. */
  extras: Readonly<Record<string, unknown>>;
}

interface Layer {
  source: string;
  values: Record<string, unknown>;
}

/**
 * Loads default.(js|yaml), overlays <NODE_ENV>.(js|yaml) and the environment variables PORT, ADMIN_PORT
 * and REDIS_URL, validates the result and freezes it.
 * @throws ConfigError listing every problem as `<file>: <key path>: <reason>`.
 */
export async function loadConfig(options: LoadConfigOptions): Promise<LoadedConfig> {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const environment: Environment = env.NODE_ENV === 'production' ? 'production' : 'development';
  const dir = path.resolve(cwd, options.configDir);
  const display = (file: string) => {
    const relative = path.relative(cwd, file);
    return relative.startsWith('..') ? file : relative || '.';
  };

  const layers: Layer[] = [];
  const defaultFile = findConfigFile(dir, 'default', display(dir));
  if (!defaultFile) {
    throw new ConfigError([
      `${display(dir)}: no default.js or default.yaml here (create one with gateway init)`,
    ]);
  }
  layers.push({
    source: display(defaultFile),
    values: await readConfigFile(defaultFile, display(defaultFile)),
  });
  const overlayName = env.NODE_ENV?.trim();
  if (overlayName && overlayName !== 'default' && /^[\w.-]+$/.test(overlayName)) {
    const overlayFile = findConfigFile(dir, overlayName, display(dir));
    if (overlayFile) {
      layers.push({
        source: display(overlayFile),
        values: await readConfigFile(overlayFile, display(overlayFile)),
      });
    }
  }
  layers.push(environmentLayer(env));

  const merged = layers.reduce<Record<string, unknown>>((into, layer) => deepMerge(into, layer.values), {});
  // A misspelt scheme (`JWT`) is read as the one it most likely means, so that the mistakes in that
  // scheme's settings are named in the same pass as the misspelling, which fails the load all the same.
  const meant = schemeMeant(merged.APIKeyAuthType);
  const read = meant === undefined ? merged : { ...merged, APIKeyAuthType: meant };
  // The layer that defines the deepest part of the key path is the one to blame; later layers win ties.
  const sourceOf = (keyPath: KeyPath) =>
    layers.reduce((best, layer) => {
      const depth = depthIn(layer.values, keyPath);
      return depth > 0 && depth >= depthIn(best.values, keyPath) ? layer : best;
    });
  const describe = ({ path: keyPath, message }: Problem) =>
    `${sourceOf(keyPath).source}: ${formatKeyPath(keyPath) || '(top level)'}: ${message}`;

  // One pass names every mistake: the cross-key rules run on what the schema could read of the rest.
  const schema = configSchema.superRefine(
    (config, context) => {
      for (const { path: keyPath, message } of [
        ...crossFieldProblems(config, environment, (keyPath) => valueAt(merged, keyPath)),
        ...unreadableFiles(config, cwd),
      ])
        context.addIssue({ code: 'custom', path: [...keyPath], message });
    },
    { when: () => true },
  );
  const parsed = schema.safeParse(read);
  const problems = [
    ...(meant === undefined
      ? []
      : [{ path: ['APIKeyAuthType'], message: unknownAuthType(merged.APIKeyAuthType) }]),
    ...(parsed.success ? [] : parsed.error.issues.flatMap(toProblems)),
  ].map(describe);
  const plugin = await pluginKeys(read, cwd);
  const unknownKeys = Object.keys(merged).filter((key) => !knownTopLevelKeys.has(key));
  for (const key of unknownKeys.filter((name) => !plugin.keys.has(name))) {
    problems.push(
      describe({
        path: [key],
        message: plugin.name
          ? `unknown key (the plugin '${plugin.name}' declares ${plugin.keys.size > 0 ? [...plugin.keys].join(', ') : 'none'} in its static configKeys)`
          : unknownKeyMessage(key, [...knownTopLevelKeys]),
      }),
    );
  }
  problems.push(...plugin.problems);
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);

  const extras = Object.fromEntries(unknownKeys.map((key) => [key, merged[key]]));
  return { config: deepFreeze(parsed.data), environment, extras: deepFreeze(extras) };
}

/**
 * The top-level keys the auth plugin of `values` declares as its own (`static configKeys = ['secret']`):
 * the gateway refuses any other key it does not know. Loading the plugin here (constructing it is
 * `start`'s) names a plugin that cannot load in the same pass as the other mistakes.
 */
async function pluginKeys(
  values: Record<string, unknown>,
  cwd: string,
): Promise<{ name: string | null; keys: ReadonlySet<string>; problems: string[] }> {
  const spec = values.APIKeyAuthPlugin;
  if (!namesPlugin(values) || typeof spec !== 'string' || spec === '')
    return { name: null, keys: new Set(), problems: [] };
  try {
    const declared = (await loadAuthPlugin(spec, cwd)).configKeys ?? [];
    if (!Array.isArray(declared) || !declared.every((key) => typeof key === 'string'))
      return {
        name: spec,
        keys: new Set(),
        problems: [`APIKeyAuthPlugin: '${spec}' has a static configKeys that is not a list of key names`],
      };
    return { name: spec, keys: new Set(declared), problems: [] };
  } catch (error) {
    if (error instanceof ConfigError) return { name: spec, keys: new Set(), problems: [...error.problems] };
    throw error;
  }
}

/** Whether the config's values, as given, name the plugin scheme: at the top level, or as an `auth`. */
function namesPlugin(values: Record<string, unknown>): boolean {
  const names = (auth: unknown) => auth === 'plugin' || (Array.isArray(auth) && auth.includes('plugin'));
  const records = (list: unknown): Array<Record<string, unknown>> =>
    Array.isArray(list)
      ? list.filter((item): item is Record<string, unknown> => typeof item === 'object' && item !== null)
      : [];
  return (
    values.APIKeyAuthType === 'plugin' ||
    records(values.apis).some(
      (api) => names(api.auth) || records(api.methods).some((method) => names(method.auth)),
    )
  );
}

function environmentLayer(env: NodeJS.ProcessEnv): Layer {
  const values: Record<string, unknown> = {};
  const port = (name: string) => {
    const text = env[name];
    if (text === undefined || text === '') return undefined;
    return /^\d+$/.test(text) ? Number(text) : text;
  };
  if (port('PORT') !== undefined) values.port = port('PORT');
  if (port('ADMIN_PORT') !== undefined) values.admin = { port: port('ADMIN_PORT') };
  if (env.REDIS_URL) values.store = { type: 'redis', url: env.REDIS_URL };
  const names = [env.PORT && 'PORT', env.ADMIN_PORT && 'ADMIN_PORT', env.REDIS_URL && 'REDIS_URL'].filter(
    Boolean,
  );
  return { source: `environment (${names.join(', ')})`, values };
}

function toProblems(issue: z.core.$ZodIssue): Problem[] {
  if (issue.code === 'unrecognized_keys') {
    // The memory store has no Redis settings: a store that sets them has most likely left out its type.
    const inStore = issue.path.length === 1 && issue.path[0] === 'store';
    return issue.keys.map((key) => ({
      path: [...issue.path, key] as KeyPath,
      message:
        inStore && redisOnlyStoreKeys.has(key)
          ? "applies to store.type 'redis' only (the store is 'memory' unless it says so)"
          : unknownKeyMessage(key, keysAt(configSchema, issue.path)),
    }));
  }
  const matched = issue.code === 'invalid_union' ? objectOptionIssues(issue) : null;
  if (matched !== null)
    return matched.flatMap((inner) => toProblems({ ...inner, path: [...issue.path, ...inner.path] }));
  return [{ path: issue.path as KeyPath, message: issue.message }];
}

/**
 * An object that fails the one object form of a union (an upstream's `{ targets }`) is told what is wrong
 * inside it, not that it is no URL: the issues of the one option that took it for its type and found
 * fault only within it (zod leaves the input out of a reported issue, so its type is read from them).
 */
function objectOptionIssues(issue: z.core.$ZodIssueInvalidUnion): z.core.$ZodIssue[] | null {
  // A key of an object, not an item of a list: a list's union (`auth: ['jwt', 'basik']`) names the
  // value it refuses in its own message.
  const within = issue.errors.filter(
    (issues) => issues.length > 0 && issues.every((inner) => typeof inner.path[0] === 'string'),
  );
  return within.length === 1 ? within[0]! : null;
}

function unreadableFiles(config: Config, cwd: string): Problem[] {
  const files: Array<[unknown, KeyPath]> = [
    [config.tls?.key, ['tls', 'key']],
    [config.tls?.cert, ['tls', 'cert']],
    [config.tls?.ca, ['tls', 'ca']],
    // On a config the schema refused, the APIs may be anything: only files named where they belong are read.
    ...(Array.isArray(config.apis) ? config.apis : []).flatMap((api, i) => {
      const upstream: unknown = isPlainObject(api) ? api.upstream : undefined;
      const tls = isPlainObject(upstream) && isPlainObject(upstream.tls) ? upstream.tls : undefined;
      return (['ca', 'cert', 'key'] as const).map((name): [unknown, KeyPath] => [
        tls?.[name],
        ['apis', i, 'upstream', 'tls', name],
      ]);
    }),
  ];
  return files.flatMap(([file, keyPath]) => {
    if (typeof file !== 'string') return [];
    try {
      readFileSync(path.resolve(cwd, file));
      return [];
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      return [{ path: keyPath, message: `cannot read ${file} (${code})` }];
    }
  });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Objects merge key by key; arrays and scalars of the later layer replace the earlier ones. */
function deepMerge(base: Record<string, unknown>, overlay: Record<string, unknown>): Record<string, unknown> {
  const result: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(overlay)) {
    if (key === '__proto__' || key === 'constructor' || key === 'prototype') continue;
    const current = result[key];
    result[key] = isPlainObject(current) && isPlainObject(value) ? deepMerge(current, value) : value;
  }
  return result;
}

/** The value at `keyPath` in `values`, or undefined. */
function valueAt(values: unknown, keyPath: KeyPath): unknown {
  let node = values;
  for (const key of keyPath) {
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string | number, unknown>)[key];
  }
  return node;
}

/** How many leading keys of `keyPath` exist in `values`. */
function depthIn(values: unknown, keyPath: KeyPath): number {
  let node = values;
  let depth = 0;
  for (const key of keyPath) {
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, key)) break;
    node = (node as Record<string | number, unknown>)[key];
    depth += 1;
  }
  return depth;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
