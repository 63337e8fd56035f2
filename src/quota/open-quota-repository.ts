import path from 'node:path';
import { ConfigError } from '../config/config-error.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { DefinitionsSnapshot } from './definitions-snapshot.js';
import { FileQuotaRepository } from './file-quota-repository.js';
import { QuotaStoreCorrupt, type QuotaRepository } from './quota-repository.js';
import { RedisQuotaRepository } from './redis-quota-repository.js';

/**
 * The repository of `store.type`, opened: the well-known quotas exist when this resolves.
 * @throws ConfigError when the stored definitions cannot be read (the start fails with exit 2; the store
 * is left as it is).
 */
export async function openQuotaRepository(
  config: Readonly<Config>,
  redis: RedisConnection | null,
  context: { logger: Logger; cwd: string },
): Promise<QuotaRepository> {
  const logger = context.logger.child({ component: 'quotas' });
  const { store } = config;
  const repository = redis
    ? new RedisQuotaRepository(redis, store.prefix, logger, {
        snapshot: new DefinitionsSnapshot(
          path.resolve(context.cwd, store.snapshotFile),
          storeName(store),
          logger,
        ),
      })
    : new FileQuotaRepository(path.resolve(context.cwd, store.file), logger);
  try {
    await repository.open();
  } catch (error) {
    if (error instanceof QuotaStoreCorrupt) throw new ConfigError([`store.file: ${error.message}`]);
    throw error;
  }
  return repository;
}

/**
 * The Redis store a snapshot belongs to: the prefix and the servers (host, port and database; never the
 * credentials of the URL), so that a snapshot is never put into another store.
 */
function storeName(store: Readonly<Config['store']>): string {
  const urls = store.cluster ?? (store.url ? [store.url] : []);
  const servers = urls.map((url) => {
    const { hostname, port, pathname } = new URL(url);
    return `${hostname}:${port || 6379}/${pathname.slice(1) || 0}`;
  });
  return `${store.prefix} on ${servers.sort().join(',')}`;
}
