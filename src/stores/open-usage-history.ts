import path from 'node:path';
import type { Config } from '../config/schema.js';
import { ConfigError } from '../kit/config-error.js';
import { FileUsageHistory, usageHistoryFileOf } from '../quota/file-usage-history.js';
import type { UsageHistoryStore } from '../quota/usage-history.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { RedisUsageHistory } from './redis-usage-history.js';

/**
 * The usage history of `store.type`, opened: Redis hashes beside the counters, or the memory store's
 * history file beside its quota file (`usage-history.json`), read now.
 * @throws ConfigError naming the file when the memory store's history file cannot be read as one
 */
export async function openUsageHistory(
  config: Readonly<Config>,
  redis: RedisConnection | null,
  cwd: string,
): Promise<UsageHistoryStore> {
  const { store, usageHistory } = config;
  if (redis && store.type === 'redis') return new RedisUsageHistory(redis, store.prefix, usageHistory.days);
  const history = new FileUsageHistory(usageHistoryFileOf(path.resolve(cwd, store.file)), usageHistory.days);
  try {
    await history.open();
  } catch (error) {
    throw new ConfigError([`store.file: ${(error as Error).message}`]);
  }
  return history;
}
