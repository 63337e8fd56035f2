import { wellKnownQuotas, type QuotaRecord, type StoredQuota } from './model.js';
import type { RefusedQuota } from './quota-repository.js';
import { etagOf, parseRecord, serializeRecord, stored } from './stored-records.js';

/**
 * The quota definitions of a Redis store as one gateway saw them: every stored text as it was (one the
 * quota schema refuses included, so that a restore gives it back unchanged), the application links, and
 * the version of the set, which every write raises by one.
 */
export interface DefinitionSet {
  version: number;
  /** Quota id → its stored JSON text. */
  definitions: Record<string, string>;
  /** Application → the id of its own quota. */
  applications: Record<string, string>;
}

/**
 * The version of the well-known quotas alone, which a gateway holding nothing puts into an empty Redis:
 * below every version a write makes (and below 0, the version of a set stored before versions existed),
 * so that any set another gateway holds replaces it.
 */
export const defaultsVersion = -1;

/** The well-known quotas as they are before anyone changes them, as a set. */
export function wellKnownSet(): DefinitionSet {
  const definitions = Object.fromEntries(
    wellKnownQuotas().map((record) => [record.quota.id, serializeRecord(record)]),
  );
  return { version: defaultsVersion, definitions, applications: {} };
}

/** The well-known quotas that `set` lacks, as their defaults. */
export function missingWellKnown(set: DefinitionSet): QuotaRecord[] {
  return wellKnownQuotas().filter((record) => !Object.hasOwn(set.definitions, record.quota.id));
}

/**
 * The definitions of `set` read through the quota schema. A definition the schema refuses is kept out of
 * `records` (a well-known quota falls back to its empty default) and listed in `refused`.
 */
export function readDefinitionSet(set: DefinitionSet): {
  records: Map<string, StoredQuota>;
  refused: Map<string, RefusedQuota>;
} {
  const records = new Map<string, StoredQuota>();
  const refused = new Map<string, RefusedQuota>();
  for (const [id, json] of Object.entries(set.definitions)) {
    const result = readDefinition(id, json);
    if ('record' in result) {
      records.set(id, { ...result.record, etag: etagOf(json) });
      continue;
    }
    const definition: RefusedQuota = { id, etag: etagOf(json), problems: result.problems, stored: json };
    const named = applicationIn(json);
    const application = named === null ? linkedTo(id, set.applications) : named;
    if (application !== undefined) definition.application = application;
    refused.set(id, definition);
  }
  for (const record of wellKnownQuotas()) {
    if (!records.has(record.quota.id)) records.set(record.quota.id, stored(record));
  }
  return { records, refused };
}

/** The stored text of quota `id` read through the quota schema: the record, or every problem it has. */
function readDefinition(id: string, json: string): { record: QuotaRecord } | { problems: string[] } {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return { problems: ['not JSON'] };
  }
  const parsed = parseRecord(value);
  if ('record' in parsed && parsed.record.quota.id !== id) {
    return { problems: [`id: must be '${id}', the key it is stored under`] };
  }
  return parsed;
}

/** The application linked to quota `id` in the applications hash (`links`): for a text that cannot tell. */
export function linkedTo(id: string, links: Record<string, string>): string | undefined {
  return Object.entries(links).find(([, quotaId]) => quotaId === id)?.[0];
}

/**
 * The application a stored text names, whether or not the schema accepts the rest of it: undefined when
 * it is a JSON object that names none, null when it is no JSON object at all (and so cannot tell).
 */
export function applicationIn(json: string): string | undefined | null {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const { application } = value as { application?: unknown };
  return typeof application === 'string' ? application : undefined;
}
