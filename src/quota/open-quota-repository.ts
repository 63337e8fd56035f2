import path from 'node:path';
import { ConfigError } from '../config/config-error.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { RedisConnection } from '../redis/connect-redis.js';
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
  const repository = redis
    ? new RedisQuotaRepository(redis, config.store.prefix, logger)
    : new FileQuotaRepository(path.resolve(context.cwd, config.store.file), logger);
  try {
    await repository.open();
  } catch (error) {
    if (error instanceof QuotaStoreCorrupt) throw new ConfigError([`store.file: ${error.message}`]);
    throw error;
  }
  return repository;
}
