import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { isModuleNamespaceObject } from 'node:util/types';
import { pathToFileURL } from 'node:url';
import { compileFunction, constants as vmConstants } from 'node:vm';
import { parse as parseJavaScript } from 'acorn';
import YAML, { LineCounter, type YAMLError } from 'yaml';
import { ConfigError } from '../kit/config-error.js';

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

/**
 * Reads a config file into a plain object, as it is on disk now (a reload reads the edited file, not
 * the module Node cached at the start). A syntax error names the file and the line.
 */
export async function readConfigFile(file: string, display: string): Promise<Record<string, unknown>> {
  const value = /\.ya?ml$/.test(file) ? readYaml(file, display) : await readModule(file, display);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError([`${display}: must export an object (module.exports = { ... })`]);
  }
  return value as Record<string, unknown>;
}

function readYaml(file: string, display: string): unknown {
  const text = readFileSync(file, 'utf8');
  const lines = new LineCounter();
  const document = YAML.parseDocument(text, { prettyErrors: false, lineCounter: lines });
  const [error] = document.errors;
  if (error) throw new ConfigError([yamlProblem(error, text, lines, display)]);
  return document.toJS();
}

/**
 * Where a YAML syntax error is. A key indented deeper than the one above it (`port: 8081` then
 * `    users: []`) reads as the value above it going on over the next line, and then being used as a
 * key: the parser blames the start of that value, on the line above. The mistake is the indentation of
 * the line the key is on.
 */
function spotOf(error: YAMLError, text: string): { offset: number; hint: string } {
  const start = error.pos[0];
  if (error.code !== 'BLOCK_AS_IMPLICIT_KEY') return { offset: start, hint: '' };
  const keyEnd = text.slice(start).search(/:(?:\s|$)/);
  const lineStart = keyEnd === -1 ? -1 : text.lastIndexOf('\n', start + keyEnd) + 1;
  if (lineStart <= start) return { offset: start, hint: '' };
  return {
    offset: lineStart + /^[ \t]*/.exec(text.slice(lineStart))![0].length,
    hint: ' (this line is indented more than the key above it)',
  };
}

/**
 * A YAML syntax error as the loader says any: the file, the line and column, the reason, then the line
 * with a caret under the spot (and the line before, when the spot is where a line's text begins).
 */
function yamlProblem(error: YAMLError, text: string, lines: LineCounter, display: string): string {
  if (error.pos[0] === -1) return `${display}: cannot parse: ${error.message}`;
  const { offset, hint } = spotOf(error, text);
  const { line, col } = lines.linePos(offset);
  const lineText = (number: number) =>
    text.slice(lines.lineStarts[number - 1], lines.lineStarts[number] ?? text.length).replace(/[\r\n]+$/, '');
  const spotted = lineText(line);
  const frame = [
    ...(line > 1 && spotted.slice(0, col - 1).trim() === '' ? [lineText(line - 1)] : []),
    spotted,
    `${' '.repeat(col - 1)}^`,
  ];
  return [
    `${display}: line ${line}, column ${col}: cannot parse: ${error.message}${hint}`,
    ...frame.filter((shown) => shown.trim() !== '').map((shown) => `    ${shown}`),
  ].join('\n');
}

/**
 * How a config file is evaluated: as CommonJS through `require`, as an ES module through `import`, or
 * as CommonJS compiled from its text, where Node would take it for an ES module.
 */
type ModuleFormat = 'commonjs' | 'module' | 'commonjs-in-esm-package';

/**
 * Node's rule: .cjs and .mjs say it; a .js file is what the nearest package.json's `type` says. With
 * one exception: a .js file whose own folder has no package.json, under a package of `"type": "module"`,
 * and that is written as CommonJS (it parses as a script: no `import` or `export`, which an ES module
 * needs to export anything) is CommonJS. That is a conf/ mounted over an ES module application's folder
 * (the image's /app/conf): the package above it is the application's, not the config's.
 */
function moduleFormat(file: string): ModuleFormat {
  if (file.endsWith('.cjs')) return 'commonjs';
  if (file.endsWith('.mjs')) return 'module';
  const own = path.dirname(file);
  for (let dir = own; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      if (packageType(manifest) !== 'module') return 'commonjs';
      return dir !== own && parsesAsScript(file) ? 'commonjs-in-esm-package' : 'module';
    }
    if (path.dirname(dir) === dir) return 'commonjs';
  }
}

/** The `type` of a package.json; one that cannot be read is CommonJS, as Node takes it. */
function packageType(manifest: string): 'commonjs' | 'module' {
  try {
    const { type } = JSON.parse(readFileSync(manifest, 'utf8')) as { type?: unknown };
    return type === 'module' ? 'module' : 'commonjs';
  } catch {
    return 'commonjs';
  }
}

const scriptOptions = {
  ecmaVersion: 'latest',
  sourceType: 'script',
  allowReturnOutsideFunction: true,
  allowHashBang: true,
} as const;

/** True when the file is a CommonJS script: no `import` or `export` declaration, no top-level `await`. */
function parsesAsScript(file: string): boolean {
  try {
    parseJavaScript(readFileSync(file, 'utf8'), scriptOptions);
    return true;
  } catch {
    return false;
  }
}

/** The parameters Node's CommonJS loader wraps a module's text in. */
const commonJsParameters = ['exports', 'require', 'module', '__filename', '__dirname'];

/**
 * Evaluates a file's text as a CommonJS module, as Node's loader would in a CommonJS package: `require`
 * resolves from the file's folder, and a dynamic `import()` in it works as in any module.
 */
function evaluateCommonJs(file: string): unknown {
  const wrapped = compileFunction(readFileSync(file, 'utf8'), commonJsParameters, {
    filename: file,
    importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const module = { exports: {} as unknown };
  wrapped.call(module.exports, module.exports, createRequire(file), module, file, path.dirname(file));
  return module.exports;
}

/** Distinguishes each import of an ES module file, so that Node evaluates it again instead of reusing it. */
let imports = 0;

/**
 * Evaluates the file afresh. Node caches a module for the life of the process (an import with another
 * query string too, for CommonJS), so CommonJS is required after its cache entry is removed, and an ES
 * module is imported under a URL not seen before (each reload keeps one small module record). Modules
 * the file itself imports are not evaluated again.
 */
async function evaluateFresh(file: string, format: ModuleFormat): Promise<unknown> {
  if (format === 'commonjs-in-esm-package') return evaluateCommonJs(file);
  if (format === 'module') {
    const module = (await import(`${pathToFileURL(file).href}?load=${(imports += 1)}`)) as {
      default?: unknown;
    };
    return module.default ?? module;
  }
  const require = createRequire(file);
  delete require.cache[file];
  const exported = require(file) as unknown;
  // Node 20.19+ requires an ES module too (a .js file with `export` outside a "type": "module" package).
  return isModuleNamespaceObject(exported)
    ? ((exported as { default?: unknown }).default ?? exported)
    : exported;
}

async function readModule(file: string, display: string): Promise<unknown> {
  const format = moduleFormat(file);
  try {
    return await evaluateFresh(file, format);
  } catch (error) {
    throw loadError(file, display, error, format);
  }
}

function loadError(file: string, display: string, error: unknown, format: ModuleFormat): ConfigError {
  const hint = /module is not defined in ES module scope/.test(String(error))
    ? ' (the file is CommonJS in an ESM package: rename it to default.cjs)'
    : '';
  const where = locationOf(file, error, format);
  return new ConfigError([
    `${display}${where ? `: line ${where.line}, column ${where.column}` : ''}: cannot load: ${firstLine(error)}${hint}`,
  ]);
}

/**
 * Where in the file the error is. Node gives an ES module's SyntaxError no position, so the source is
 * parsed (acorn) to find it; an error thrown while the file ran is placed by its stack's frame in it.
 */
function locationOf(
  file: string,
  error: unknown,
  format: ModuleFormat,
): { line: number; column: number } | null {
  if (error instanceof SyntaxError) {
    try {
      parseJavaScript(readFileSync(file, 'utf8'), {
        ...scriptOptions,
        sourceType: format === 'module' ? 'module' : 'script',
      });
    } catch (parseError) {
      const loc = (parseError as { loc?: { line: number; column: number } }).loc;
      if (loc) return { line: loc.line, column: loc.column + 1 };
    }
  }
  const stack = error instanceof Error ? (error.stack ?? '') : '';
  for (const spelling of [file, pathToFileURL(file).href]) {
    const escaped = spelling.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const frame = new RegExp(`${escaped}(?:\\?[^:\\s]*)?:(\\d+)(?::(\\d+))?`).exec(stack);
    if (frame) return { line: Number(frame[1]), column: Number(frame[2] ?? 1) };
  }
  return null;
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.split('\n')[0] ?? text;
}
