/**
 * The paths of a `throttleunits` restriction's `body`: where in a JSON answer (or in each JSON event of a
 * stream) the upstream says what the exchange cost, as `usage.total_tokens`. Parsed once, when the config
 * is loaded; read on every answer, so reading is cheap.
 */
import { largestUnits } from './quota-terms.js';

/** Property names joined by dots. The rule the schema gives when a path breaks it. */
export const unitPathRule =
  'must be property names (letters, digits, _ and -) joined by dots, like usage.total_tokens';
const unitPathSyntax = /^[A-Za-z0-9_-]{1,64}(?:\.[A-Za-z0-9_-]{1,64}){0,15}$/;
/** At most this many paths: their values added stay a safe integer (8 × 10^15 < 2^53). */
export const mostUnitPaths = 8;

/** Why `path` is not a unit path, or undefined when it is one. */
export const unitPathProblem = (path: string): string | undefined =>
  unitPathSyntax.test(path) ? undefined : unitPathRule;

/**
 * Why `paths` (one path, or a list of them) cannot be a `body`, or undefined when it can: a message for
 * the schema, saying which item of a list is wrong.
 */
export function unitPathsProblem(paths: string | readonly string[]): string | undefined {
  if (typeof paths === 'string') return unitPathProblem(paths);
  if (paths.length === 0 || paths.length > mostUnitPaths) {
    return `must list 1 to ${mostUnitPaths} paths`;
  }
  for (const [index, path] of paths.entries()) {
    const problem = unitPathProblem(path);
    if (problem !== undefined) return `[${index}]: ${problem}`;
    if (paths.indexOf(path) < index) return `[${index}]: lists ${path} a second time`;
  }
  return undefined;
}

/** Unit paths as the reader walks them. Build it with `parseUnitPaths`. */
export interface UnitPaths {
  /** The paths as written, for logs and messages. */
  readonly text: readonly string[];
  /** Each path as its property names. */
  readonly names: readonly (readonly string[])[];
  /** `"name"` for each distinct first property name, in UTF-8: what an event must hold to be read. */
  readonly firstKeys: readonly Buffer[];
}

/**
 * Parses `paths` (one path or a list, as a `body` holds them).
 * @throws {TypeError} when they break the rule `unitPathsProblem` checks: the schema has let through
 *   what it should have refused.
 */
export function parseUnitPaths(paths: string | readonly string[]): UnitPaths {
  const problem = unitPathsProblem(paths);
  if (problem !== undefined) throw new TypeError(`unit paths ${JSON.stringify(paths)}: ${problem}`);
  const text = typeof paths === 'string' ? [paths] : [...paths];
  const names = text.map((path) => Object.freeze(path.split('.')));
  const firstNames = [...new Set(names.map((path) => path[0]!))];
  return Object.freeze({
    text: Object.freeze(text),
    names: Object.freeze(names),
    firstKeys: Object.freeze(firstNames.map((name) => Buffer.from(JSON.stringify(name)))),
  });
}

const jsonSpace = new Set([0x20, 0x09, 0x0a, 0x0d]);
const colonByte = 0x3a;
const nByte = 0x6e;

/**
 * Whether `json` may hold a value at one of the paths: it has the first property name of one, as a key
 * whose value is not `null`. A cheap test on bytes before JSON.parse, which most events of a stream fail
 * (OpenAI's chunks carry `"usage":null` until the last). It may say yes wrongly (the name nested deeper),
 * never no wrongly, except for a key spelt with escapes (`"\u0075sage"`), which no API sends.
 */
export function mayHoldUnits(paths: UnitPaths, json: Buffer): boolean {
  for (const key of paths.firstKeys) {
    for (let at = json.indexOf(key); at !== -1; at = json.indexOf(key, at + 1)) {
      let next = skipSpace(json, at + key.length);
      if (json[next] !== colonByte) continue;
      next = skipSpace(json, next + 1);
      if (next < json.length && json[next] !== nByte) return true;
    }
  }
  return false;
}

function skipSpace(json: Buffer, at: number): number {
  while (at < json.length && jsonSpace.has(json[at]!)) at += 1;
  return at;
}

/**
 * What a path has said: a whole number of units, a value that is none (`'wrong'`: a fraction, a string,
 * a negative, an object), or nothing (undefined: its value was absent or `null`).
 */
export type PathValue = number | 'wrong' | undefined;

/**
 * The sum of what the paths said, at most 999999999999999; null when no path said a value, or one said
 * a wrong one.
 */
export function unitsTotal(values: readonly PathValue[]): number | null {
  let sum = 0;
  let said = false;
  for (const value of values) {
    if (value === 'wrong') return null;
    if (value === undefined) continue;
    sum += value;
    said = true;
  }
  return said ? Math.min(sum, largestUnits) : null;
}

/**
 * The values the paths have said so far, the last of each winning. A path whose value is absent or
 * `null` has said nothing; any other value that is not a whole number from 0 to 999999999999999 (a
 * fraction, a string, a negative) is a wrong value, and while it is a path's last, the answer is
 * unreadable.
 */
export class UnitTally {
  private readonly last: PathValue[];

  constructor(private readonly paths: UnitPaths) {
    this.last = paths.names.map(() => undefined);
  }

  /** Notes the values the paths have in `json`, a value JSON.parse gave. */
  read(json: unknown): void {
    this.paths.names.forEach((names, index) => {
      const value = valueAt(json, names);
      if (value === undefined || value === null) return;
      this.last[index] = isUnits(value) ? value : 'wrong';
    });
  }

  /**
   * The sum of the last value of each path that said one, at most 999999999999999; null when no path
   * said one, or one's last value is wrong.
   */
  total(): number | null {
    return unitsTotal(this.last);
  }
}

/** The value at `names` in `json`, through objects only (an array has no names), or undefined. */
function valueAt(json: unknown, names: readonly string[]): unknown {
  let value = json;
  for (const name of names) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, name)) {
      return undefined;
    }
    value = (value as Record<string, unknown>)[name];
  }
  return value;
}

/** Whether `value` is a whole number of units: from 0 to 999999999999999. */
export const isUnits = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= largestUnits;
