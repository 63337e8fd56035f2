import { createHash } from 'node:crypto';
import { storedRecordSchema, type QuotaRecord, type StoredQuota } from './quota-schema.js';
import { problemsOf } from './schema-problems.js';

/**
 * The stored form of a record: the JSON of the quota schema's own output, so its keys come in one fixed
 * order (equal records have equal ETags) and nothing is written that the stores could not read back.
 * @throws Error naming the problems when the record breaks the quota schema.
 */
export function serializeRecord(record: QuotaRecord): string {
  const parsed = storedRecordSchema.safeParse({
    ...record.quota,
    application: record.application,
    plan: record.plan,
  });
  if (!parsed.success) {
    throw new Error(`not a storable quota: ${problemsOf(parsed.error.issues, 'record').join('; ')}`);
  }
  return JSON.stringify(parsed.data);
}

/** The ETag of a stored JSON text: SHA-1 hex, which Redis Lua (`redis.sha1hex`) computes the same way. */
export function etagOf(json: string): string {
  return createHash('sha1').update(json, 'utf8').digest('hex');
}

/** A stored value read through the quota schema: the record, or every problem it has. */
export function parseRecord(value: unknown): { record: QuotaRecord } | { problems: string[] } {
  const parsed = storedRecordSchema.safeParse(value);
  if (!parsed.success) return { problems: problemsOf(parsed.error.issues, 'record') };
  const { application, plan, ...quota } = parsed.data;
  return {
    record: {
      quota,
      ...(application === undefined ? {} : { application }),
      ...(plan === undefined ? {} : { plan }),
    },
  };
}

/** A record with the ETag of its stored form. */
export function stored(record: QuotaRecord): StoredQuota {
  return { ...record, etag: etagOf(serializeRecord(record)) };
}

/** `record` as it replaces a stored record of `application`: a replacement keeps the application. */
export function replacing(record: QuotaRecord, application: string | undefined): QuotaRecord {
  return {
    quota: record.quota,
    ...(application === undefined ? {} : { application }),
    ...(record.plan === undefined ? {} : { plan: record.plan }),
  };
}
