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
 * The known key an unknown one most likely misspells: the same but for case, else the nearest within two
 * edits (one for a name of two letters): `prot` → `port` (a swap is two), `upstrem` → `upstream`.
 */
export function nearMiss(unknown: string, known: readonly string[]): string | undefined {
  const sameButCase = known.find((candidate) => candidate.toLowerCase() === unknown.toLowerCase());
  if (sameButCase) return sameButCase;
  return closestMatch(unknown, known, { maxDistance: unknown.length <= 2 ? 1 : 2 });
}

/** `unknown key`, with the near miss when there is one. */
export function unknownKeyMessage(unknown: string, known: readonly string[]): string {
  const suggestion = nearMiss(unknown, known);
  return suggestion ? `unknown key (did you mean ${suggestion}?)` : 'unknown key';
}
