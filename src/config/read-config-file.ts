import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import YAML from 'yaml';
import { ConfigError } from './config-error.js';

const extensions = ['.js', '.cjs', '.mjs', '.yaml', '.yml'] as const;

/** The one file named `<base>.<js|cjs|mjs|yaml|yml>` in `dir`, or undefined; two candidates are a mistake. */
export function findConfigFile(dir: string, base: string, displayDir: string): string | undefined {
  const found = extensions.map((ext) => path.join(dir, base + ext)).filter((file) => existsSync(file));
  if (found.length > 1) {
    throw new ConfigError([
      `${displayDir}: both ${found.map((file) => path.basename(file)).join(' and ')} exist; keep one`,
    ]);
  }
  return found[0];
}

/** Reads a config file into a plain object; a syntax error or a non-object export names the file. */
export async function readConfigFile(file: string, display: string): Promise<Record<string, unknown>> {
  const value = /\.ya?ml$/.test(file) ? readYaml(file, display) : await importModule(file, display);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError([`${display}: must export an object (module.exports = { ... })`]);
  }
  return value as Record<string, unknown>;
}

function readYaml(file: string, display: string): unknown {
  try {
    return YAML.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError([`${display}: cannot parse: ${firstLine(error)}`]);
  }
}

async function importModule(file: string, display: string): Promise<unknown> {
  try {
    const module = (await import(pathToFileURL(file).href)) as { default?: unknown };
    return module.default ?? module;
  } catch (error) {
    const hint = /module is not defined in ES module scope/.test(String(error))
      ? ' (the file is CommonJS in an ESM package: rename it to default.cjs)'
      : '';
    throw new ConfigError([`${display}: cannot load: ${firstLine(error)}${hint}`]);
  }
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.split('\n')[0] ?? text;
}
