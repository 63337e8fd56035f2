import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RedisStoreConfig } from '../config/schema.js';
import type { Logger } from '../observe/log.js';
import { wellKnownQuotaIds } from '../quota/model.js';
import type { QuotaRepository } from '../quota/quota-repository.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { applicationsFileOf } from './open-application-repository.js';
import { applicationsKeyOf } from './redis-application-repository.js';

/**
 * A Redis store that holds nothing yet (the untouched well-known quotas, no application made through the
 * admin API), beside a memory store's files that hold more: someone switched stores, and what the files
 * hold is not carried over by itself. Says so at warn, with the commands that move it all.
 */
export async function hintAtUnmovedMemoryStore(
  repository: QuotaRepository,
  redis: RedisConnection,
  store: Readonly<RedisStoreConfig>,
  cwd: string,
  logger: Logger,
): Promise<void> {
  const untouched = repository
    .all()
    .every((record) => wellKnownQuotaIds.has(record.quota.id) && record.quota.restrictions.length === 0);
  if (!untouched) return;
  const file = path.resolve(cwd, store.file);
  const applicationsFile = applicationsFileOf({ file }, cwd);
  const quotas = listIn(file, 'quotas').filter((value) => {
    const record = value as { id?: string; restrictions?: unknown[] } | null;
    return !wellKnownQuotaIds.has(record?.id ?? '') || (record?.restrictions?.length ?? 0) > 0;
  }).length;
  const applications = listIn(applicationsFile, 'applications').length;
  if (quotas + applications === 0) return;
  const held = await redis.hlen(applicationsKeyOf(store.prefix)).catch(() => null);
  if (held !== 0) return;
  logger.warn(
    { file, applicationsFile, quotas, applications },
    `Redis holds no quotas yet, nor applications, but the memory store's files hold ${quotas} quotas and ${applications} applications made through the admin API: they are not carried over by themselves. To move them: gateway quotas export --from-file ${file} > quotas.yaml, then gateway quotas import quotas.yaml`,
  );
}

/** The list under `key` in the JSON file `file`: empty when the file is absent or not such JSON. */
function listIn(file: string, key: string): unknown[] {
  try {
    const list = (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown> | null)?.[key];
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}
