import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { ConfigError } from './config-error.js';
import {
  crossFieldProblems,
  formatKeyPath,
  type Environment,
  type KeyPath,
  type Problem,
} from './cross-field-rules.js';
import { findConfigFile, readConfigFile } from './read-config-file.js';
import { configSchema, knownTopLevelKeys, type Config } from './schema.js';

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
  /** Lines worth a warning that do not stop the start, such as unknown top-level keys. */
  warnings: string[];
  /** Unknown top-level keys and their values: not the gateway's, but a plugin may read them. */
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
  // The layer that defines the deepest part of the key path is the one to blame; later layers win ties.
  const sourceOf = (keyPath: KeyPath) =>
    layers.reduce((best, layer) => {
      const depth = depthIn(layer.values, keyPath);
      return depth > 0 && depth >= depthIn(best.values, keyPath) ? layer : best;
    });
  const describe = ({ path: keyPath, message }: Problem) =>
    `${sourceOf(keyPath).source}: ${formatKeyPath(keyPath) || '(top level)'}: ${message}`;

  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) throw new ConfigError(parsed.error.issues.flatMap(toProblems).map(describe));
  const config = parsed.data;
  const problems = [...crossFieldProblems(config, environment), ...unreadableFiles(config, cwd)];
  if (problems.length > 0) throw new ConfigError(problems.map(describe));

  const unknownKeys = Object.keys(merged).filter((key) => !knownTopLevelKeys.has(key));
  const warnings = unknownKeys.map(
    (key) => `${sourceOf([key]).source}: ${key}: unknown key, ignored by the gateway (a plugin may read it)`,
  );
  const extras = Object.fromEntries(unknownKeys.map((key) => [key, merged[key]]));
  return { config: deepFreeze(config), environment, warnings, extras: deepFreeze(extras) };
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
    return issue.keys.map((key) => ({ path: [...issue.path, key] as KeyPath, message: 'unknown key' }));
  }
  return [{ path: issue.path as KeyPath, message: issue.message }];
}

function unreadableFiles(config: Config, cwd: string): Problem[] {
  const files: Array<[string | undefined, KeyPath]> = [
    [config.tls?.key, ['tls', 'key']],
    [config.tls?.cert, ['tls', 'cert']],
    [config.tls?.ca, ['tls', 'ca']],
  ];
  return files.flatMap(([file, keyPath]) => {
    if (file === undefined) return [];
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
