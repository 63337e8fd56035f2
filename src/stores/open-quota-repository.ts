import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../kit/config-error.js';
import type { Config, RedisStoreConfig } from '../config/schema.js';
import type { Logger } from '../observe/log.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { planDeclaredQuotas } from '../quota/declared-quotas.js';
import { DefinitionsSnapshot } from '../quota/definitions-snapshot.js';
import { wellKnownQuotaIds } from '../quota/model.js';
import { FileQuotaRepository } from '../quota/file-quota-repository.js';
import { QuotaStoreCorrupt, type QuotaRepository } from '../quota/quota-repository.js';
import { RedisQuotaRepository } from './redis-quota-repository.js';

/**
 * The repository of `store.type`, opened: the well-known quotas exist when this resolves, and with
 * `declare` (a gateway's start; not a command's) the quotas of conf/ are written into it and the memory
 * store's file is marked as this gateway's.
 * @throws ConfigError when the stored definitions cannot be read, or a declared quota cannot be written
 * (the start fails with exit 2; the store is left as it is).
 */
export async function openQuotaRepository(
  config: Readonly<Config>,
  redis: RedisConnection | null,
  context: { logger: Logger; cwd: string; declare?: boolean },
): Promise<QuotaRepository> {
  const logger = context.logger.child({ component: 'quotas' });
  const { store } = config;
  const repository =
    redis && store.type === 'redis'
      ? new RedisQuotaRepository(redis, store.prefix, logger, {
          snapshot: new DefinitionsSnapshot(
            path.resolve(context.cwd, store.snapshotFile),
            storeName(store),
            logger,
          ),
        })
      : new FileQuotaRepository(path.resolve(context.cwd, store.file), logger, context.declare === true);
  try {
    await repository.open();
  } catch (error) {
    if (error instanceof QuotaStoreCorrupt) throw new ConfigError([`store.file: ${error.message}`]);
    throw error;
  }
  try {
    if (context.declare) await planDeclaredQuotas(repository, config).apply(logger);
  } catch (error) {
    await repository.close();
    throw error;
  }
  if (redis) migrationHint(repository, path.resolve(context.cwd, store.file), logger);
  return repository;
}

/**
 * A Redis store that holds only the untouched well-known quotas, beside a memory store's file that holds
 * more: someone switched stores, and the file's quotas are not carried over by themselves.
 */
function migrationHint(repository: QuotaRepository, file: string, logger: Logger): void {
  const untouched = repository
    .all()
    .every((record) => wellKnownQuotaIds.has(record.quota.id) && record.quota.restrictions.length === 0);
  if (!untouched || !existsSync(file)) return;
  let held: unknown[] = [];
  try {
    held = (JSON.parse(readFileSync(file, 'utf8')) as { quotas?: unknown[] }).quotas ?? [];
  } catch {
    return;
  }
  const own = held.filter((value) => {
    const record = value as { id?: string; restrictions?: unknown[] } | null;
    return !wellKnownQuotaIds.has(record?.id ?? '') || (record?.restrictions?.length ?? 0) > 0;
  });
  if (own.length === 0) return;
  logger.warn(
    { file, quotas: own.length },
    `Redis holds no quotas yet, but the memory store's file holds ${own.length}: they are not carried over by themselves. To move them: gateway quotas export --from-file ${file} > quotas.yaml, then gateway quotas import quotas.yaml`,
  );
}

/**
 * The Redis store a snapshot belongs to: the prefix and the servers (host, port and database; never the
 * credentials of the URL), so that a snapshot is never put into another store.
 */
function storeName(store: Readonly<RedisStoreConfig>): string {
  const urls = store.cluster ?? (store.url ? [store.url] : []);
  const servers = urls.map((url) => {
    const { hostname, port, pathname } = new URL(url);
    return `${hostname}:${port || 6379}/${pathname.slice(1) || 0}`;
  });
  return `${store.prefix} on ${servers.sort().join(',')}`;
}
