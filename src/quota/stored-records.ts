import { z } from 'zod';
import {
  etagOf,
  periodNames,
  quotaTypes,
  restrictionTypes,
  serializeRecord,
  type QuotaRecord,
  type StoredQuota,
} from './model.js';

const amount = z.string().regex(/^\d+(\.\d+)?$/);

const recordSchema = z.strictObject({
  id: z.string().min(1),
  type: z.enum(quotaTypes),
  name: z.string(),
  description: z.string(),
  restrictions: z.array(
    z.strictObject({
      api: z.string().min(1),
      method: z.string().min(1),
      verb: z.string().optional(),
      type: z.enum(restrictionTypes),
      config: z.union([
        z.strictObject({ messages: amount, per: amount, period: z.enum(periodNames) }),
        z.strictObject({ mb: amount, per: amount, period: z.enum(periodNames) }),
      ]),
    }),
  ),
  system: z.boolean(),
  application: z.string().min(1).optional(),
});

/**
 * Reads one stored record (as `serializeRecord` wrote it).
 * @throws Error naming the problem when the text is not a quota record.
 */
export function parseRecord(value: unknown): QuotaRecord {
  const parsed = recordSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${issue.path.join('.') || 'record'}: ${issue.message}`);
  }
  const { application, ...quota } = parsed.data;
  return application ? { quota, application } : { quota };
}

/** A record with the ETag of its stored form. */
export function stored(record: QuotaRecord): StoredQuota {
  return { ...record, etag: etagOf(serializeRecord(record)) };
}
