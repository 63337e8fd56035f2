import { configJsonSchema } from '../config/json-schema.js';

type JsonSchema = {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  default?: unknown;
  description?: string;
  minimum?: number;
  maximum?: number;
};

/** The type of a key as a reader wants it: `integer 0–65535`, `'local' | 'allow' | 'deny'`, `string[]`. */
function typeOf(schema: JsonSchema): string {
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((value) => JSON.stringify(value)).join(' \\| ');
  const options = schema.anyOf ?? schema.oneOf;
  if (options) return [...new Set(options.map(typeOf))].join(' \\| ');
  if (schema.type === 'array') {
    const item = schema.items ? typeOf(schema.items) : 'any';
    // A list of one of several values: `("a" \| "b")[]`, not `"a" \| "b"[]` (a value, or a list of "b").
    return item.includes(' \\| ') ? `(${item})[]` : `${item}[]`;
  }
  const range =
    schema.minimum !== undefined && schema.maximum !== undefined && schema.maximum < Number.MAX_SAFE_INTEGER
      ? ` ${schema.minimum}–${schema.maximum}`
      : '';
  return `${Array.isArray(schema.type) ? schema.type.join(' \\| ') : (schema.type ?? 'any')}${range}`;
}

/** The alternatives of a type cell: `"a" \\| "b"` → `"a"`, `"b"`; a list's `("a" \\| "b")[]` is one. */
const alternatives = (type: string) => type.split(/ \\\| (?![^(]*\))/);

/** A default as one short cell: scalars as they are, objects and lists named by their shape. */
function defaultOf(schema: JsonSchema): string {
  const value = schema.default;
  if (value === undefined) return '';
  const text = JSON.stringify(value);
  return text.length <= 40 ? `\`${text.replace(/\|/g, '\\|')}\`` : 'see below';
}

/** Every key of the config, with its path (`apis[].methods[].verb`), type and default, in schema order. */
function rowsOf(
  schema: JsonSchema,
  prefix: string,
  rows: Map<string, { type: string; default: string }>,
): void {
  const variants = schema.oneOf ?? schema.anyOf;
  if (variants && !schema.properties) {
    for (const variant of variants) rowsOf(variant, prefix, rows);
    return;
  }
  for (const [key, value] of Object.entries(schema.properties ?? {})) {
    const path = prefix ? `${prefix}.${key}` : key;
    const known = rows.get(path);
    // A key of several variants (APIKeyAuthType's settings): each of its types is listed once.
    if (!known) rows.set(path, { type: typeOf(value), default: defaultOf(value) });
    else
      known.type = [...new Set([...alternatives(known.type), ...alternatives(typeOf(value))])].join(' \\| ');
    const objects = [value, ...(value.anyOf ?? []), ...(value.oneOf ?? [])].filter(
      (candidate): candidate is JsonSchema => candidate?.properties !== undefined,
    );
    for (const object of objects) rowsOf(object, path, rows);
    for (const item of listItemObjects(value)) rowsOf(item, `${path}[]`, rows);
  }
}

/**
 * The objects a list holds: its items, or the object form of items written as a string or an object
 * (an upstream's targets: a URL, or `{ url, weight }`).
 */
function listItemObjects(list: JsonSchema): JsonSchema[] {
  const items = list.items;
  if (items === undefined) return [];
  if (items.properties !== undefined) return [items];
  const forms = items.anyOf ?? items.oneOf ?? [];
  const shorthand = forms.some((form) => form.type === 'string');
  return shorthand ? forms.filter((form) => form.properties !== undefined) : [];
}

/**
 * The table of config keys the documentation shows (docs/configuration.md), generated from the zod
 * schema through its JSON Schema: a test compares the page with it, so the page cannot drift.
 */
export function configKeyTable(): string {
  const rows = new Map<string, { type: string; default: string }>();
  rowsOf(configJsonSchema() as JsonSchema, '', rows);
  return [
    '| Key | Type | Default |',
    '| --- | --- | --- |',
    ...[...rows].map(([path, row]) => `| \`${path}\` | ${row.type} | ${row.default} |`),
  ].join('\n');
}
