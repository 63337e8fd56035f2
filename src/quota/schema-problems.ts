import type { z } from 'zod';
import { didYouMean, keysAt } from '../kit/key-suggestions.js';

/** `restrictions[0].config.per` for the path ['restrictions', 0, 'config', 'per']. */
export function fieldPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (text, key) =>
      typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key),
    '',
  );
}

/**
 * Every problem a schema found, as messages that name the field:
 * `restrictions[0].config.per: must be a whole number from 1 to 1000000`. `whole` names the value
 * itself when the problem is with all of it (`body: must be an object`); without it, such a message
 * names no field (`must be an object`). With the `schema` that found them, an unknown field names the
 * known one it most likely misspells: `restrictions[0].config.mesages: unknown field (did you mean
 * messages?)`.
 */
export function problemsOf(
  issues: readonly z.core.$ZodIssue[],
  whole = 'body',
  schema?: z.core.$ZodType,
): string[] {
  const messages = issues.flatMap((issue) => {
    const at = fieldPath(issue.path);
    if (issue.code === 'unrecognized_keys') {
      const known = schema ? keysAt(schema, issue.path) : [];
      return issue.keys.map((key) => `${at ? `${at}.${key}` : key}: unknown field${didYouMean(key, known)}`);
    }
    const field = at || whole;
    return [field ? `${field}: ${issue.message}` : issue.message];
  });
  return [...new Set(messages)];
}
