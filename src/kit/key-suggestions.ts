import { closestMatch } from 'leven';
import type { z } from 'zod';

/**
 * The keys an object of `schema` takes at `path` (array positions and wrappers such as optional,
 * default and pipe looked through; a union or an intersection offers the keys of all its parts), or none.
 */
export function keysAt(schema: z.core.$ZodType, path: readonly PropertyKey[]): string[] {
  const def = schema._zod.def as unknown as Record<string, unknown> & { type: string };
  switch (def.type) {
    case 'object': {
      const shape = def.shape as Record<string, z.core.$ZodType>;
      if (path.length === 0) return Object.keys(shape);
      const next = shape[String(path[0])];
      return next ? keysAt(next, path.slice(1)) : [];
    }
    case 'array':
      return path.length === 0 ? [] : keysAt(def.element as z.core.$ZodType, path.slice(1));
    case 'union':
      return [...new Set((def.options as z.core.$ZodType[]).flatMap((option) => keysAt(option, path)))];
    case 'intersection':
      return [
        ...new Set([
          ...keysAt(def.left as z.core.$ZodType, path),
          ...keysAt(def.right as z.core.$ZodType, path),
        ]),
      ];
    case 'pipe':
      return keysAt(def.in as z.core.$ZodType, path);
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'readonly':
    case 'catch':
      return keysAt(def.innerType as z.core.$ZodType, path);
    default:
      return [];
  }
}

/**
 * The known name an unknown one most likely misspells, in any case: the same, or with two neighbouring
 * letters swapped (`prot` → `port`, `strat` → `start`), else the nearest within two edits (one for a
 * name of five letters or fewer, where two edits make another word: `FETCH` is not `PATCH`; none for a
 * name of one or two): `upstrem` → `upstream`, `basik` → `basic`; else the shortest it abbreviates
 * (`secs` → `seconds`, `sec` → `second`, `DEL` → `DELETE`).
 */
export function nearMiss(unknown: string, known: readonly string[]): string | undefined {
  const lower = unknown.toLowerCase();
  const sameButCase = known.find((candidate) => candidate.toLowerCase() === lower);
  if (sameButCase) return sameButCase;
  const swapped = known.find((candidate) => isNeighbourSwap(lower, candidate.toLowerCase()));
  if (swapped) return swapped;
  const lowerKnown = known.map((candidate) => candidate.toLowerCase());
  const maxDistance = unknown.length <= 2 ? 0 : unknown.length <= 5 ? 1 : 2;
  const nearest = closestMatch(lower, lowerKnown, { maxDistance });
  if (nearest !== undefined) return known[lowerKnown.indexOf(nearest)];
  let shortest: string | undefined;
  lowerKnown.forEach((candidate, i) => {
    if (abbreviates(lower, candidate) && (shortest === undefined || candidate.length < shortest.length))
      shortest = known[i];
  });
  return shortest;
}

/**
 * `short` (two letters or more) is how people shorten `name`: its beginning (`sec`, `min`), or its first
 * and last letters with some of those between, in order (`secs`, `hrs`, `wk`).
 */
function abbreviates(short: string, name: string): boolean {
  if (short.length < 2 || short.length >= name.length || short[0] !== name[0]) return false;
  if (name.startsWith(short)) return true;
  if (short.at(-1) !== name.at(-1)) return false;
  let at = 1;
  for (const letter of short.slice(1, -1)) {
    at = name.indexOf(letter, at) + 1;
    if (at === 0 || at >= name.length) return false;
  }
  return true;
}

/** `a` is `b` with two neighbouring letters swapped. */
function isNeighbourSwap(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  const at = [...a].findIndex((letter, i) => letter !== b[i]);
  return (
    at !== -1 &&
    at + 1 < a.length &&
    a[at] === b[at + 1] &&
    a[at + 1] === b[at] &&
    a.slice(at + 2) === b.slice(at + 2)
  );
}

/** ` (did you mean X?)` when `given` is a string that most likely misspells X of `known`, else nothing. */
export function didYouMean(given: unknown, known: readonly string[]): string {
  const suggestion = typeof given === 'string' ? nearMiss(given, known) : undefined;
  return suggestion === undefined ? '' : ` (did you mean ${suggestion}?)`;
}

/**
 * A zod error map for a value that must be one of `values`: `is required` when it is absent, else
 * `message` and the value it most likely misspells (`basik` → ` (did you mean basic?)`).
 */
export function oneOf(message: string, values: readonly string[]) {
  return (issue: { input?: unknown }): string =>
    issue.input === undefined ? 'is required' : `${message}${didYouMean(issue.input, values)}`;
}

/** The value a zod discriminated union did not know, from the issue it raised about it. */
export function discriminatorOf(issue: { input?: unknown; discriminator?: string }): unknown {
  const { input, discriminator } = issue;
  return typeof input === 'object' && input !== null && discriminator !== undefined
    ? (input as Record<string, unknown>)[discriminator]
    : undefined;
}

/** `unknown key`, with the near miss when there is one. */
export function unknownKeyMessage(unknown: string, known: readonly string[]): string {
  return `unknown key${didYouMean(unknown, known)}`;
}
