import path from 'node:path';
import { ConfigError } from '../kit/config-error.js';
import type { Config, RedisStoreConfig } from '../config/schema.js';
import type { Logger } from '../observe/log.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { planDeclaredQuotas } from '../quota/declared-quotas.js';
import { DefinitionsSnapshot } from '../quota/definitions-snapshot.js';
import { FileQuotaRepository } from '../quota/file-quota-repository.js';
import { QuotaStoreCorrupt, type QuotaRepository } from '../quota/quota-repository.js';
import { RedisQuotaRepository } from './redis-quota-repository.js';
import { hintAtUnmovedMemoryStore } from './unmoved-memory-store.js';

/**
 * The repository of `store.type`, opened: the well-known quotas exist when this resolves, and with
 * `declare` (a gateway's start; not a command's) the quotas of conf/ are written into it, the memory
 * store's file is marked as this gateway's, and a Redis store that a memory store's files were not moved
 * into says how to move them.
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
  if (redis && store.type === 'redis' && context.declare)
    await hintAtUnmovedMemoryStore(repository, redis, store, context.cwd, logger);
  return repository;
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
