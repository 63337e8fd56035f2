import type { ApplicationRepository } from '../applications/application-repository.js';
import type { ApplicationSource } from '../applications/application-directory.js';
import type { LoadedConfig } from '../config/load-config.js';
import type { ReadinessCheck } from '../observe/readiness.js';
import { QuotaIndex } from '../quota/quota-index.js';
import type { QuotaRepository } from '../quota/quota-repository.js';
import { openStoreRedis, redisAnswers, type RedisConnection } from '../redis/connect-redis.js';
import { openApplicationRepository } from '../stores/open-application-repository.js';
import { openQuotaRepository } from '../stores/open-quota-repository.js';
import { openUsageHistory } from '../stores/open-usage-history.js';
import type { UsageHistoryStore } from '../quota/usage-history.js';
import type { Closers } from './closers.js';
import type { Env } from './env.js';
import type { QuotaDefinitions, Role } from './role.js';

/** The repositories of a process that owns the quota definitions: its only writer. */
export interface OwnedStores {
  quotas: QuotaRepository;
  applications: ApplicationRepository;
}

/** The stores of one process, as its role has them. */
export interface Stores {
  /** The store's Redis connection (`store.type: "redis"`), else null. */
  redis: RedisConnection | null;
  /** The prefix of the store's keys in Redis, when there is a connection. */
  redisPrefix: string | null;
  /** Redis' readiness, when there is a connection. */
  readiness: ReadinessCheck[];
  /** The repositories, in a process that owns them (not a worker). */
  owned: OwnedStores | null;
  /** The quota definitions: the owned repository, or the primary's feed. */
  definitions: QuotaDefinitions;
  /** The applications made through the portal API: the owned repository, or the primary's feed. */
  applications: ApplicationSource;
  /** The quota definitions as compiled now; a change of them compiles them again. */
  quotas(): QuotaIndex;
  /**
   * The usage history: Redis' for every process of a Redis store; the memory store's file in the process
   * that owns it (a worker of a memory store sends its lines to its primary: null).
   */
  usageHistory: UsageHistoryStore | null;
}

/** Closes a Redis connection, cutting it when it cannot say goodbye. */
export const closeRedis = (redis: RedisConnection): Promise<unknown> =>
  redis.quit().catch(() => redis.disconnect());

/**
 * Opens the stores `role` needs, and pushes their closers on `closers` (Redis first, so that it closes
 * last): Redis when the store is Redis; the quota and application repositories for a process that owns
 * them (a gateway declares conf/'s quotas into them; a command does not, and refuses a Redis that does
 * not answer rather than read a snapshot); a worker's definitions and applications from its primary.
 */
export async function openStores(
  loaded: LoadedConfig,
  role: Role,
  env: Pick<Env, 'logger' | 'cwd'>,
  closers: Closers,
): Promise<Stores> {
  const { config } = loaded;
  const redis = await openStoreRedis(config.store, env.logger);
  let owned: OwnedStores | null = null;
  let feeds: Pick<Stores, 'definitions' | 'applications'>;
  if (role.kind === 'worker') feeds = role.feeds;
  else {
    owned = await openOwned(loaded, role, env, redis);
    feeds = { definitions: owned.quotas, applications: owned.applications };
  }
  if (redis) closers.push('redis', () => closeRedis(redis));
  const { definitions, applications } = feeds;
  if (owned) closers.push('application repository', () => owned.applications.close());
  closers.push('quota definitions', () => definitions.close());
  const usageHistory =
    role.kind !== 'worker' || (redis && config.store.type === 'redis')
      ? await openUsageHistory(config, redis, env.cwd)
      : null;
  if (usageHistory) closers.push('usage history', () => usageHistory.close());
  let quotas = new QuotaIndex(definitions.all(), definitions.resets());
  definitions.onChange((records) => {
    quotas = new QuotaIndex(records, definitions.resets());
  });
  return {
    redis,
    redisPrefix: redis && config.store.type === 'redis' ? config.store.prefix : null,
    readiness: redis ? [{ name: 'redis', ready: () => redisAnswers(redis) }] : [],
    owned,
    definitions,
    applications,
    quotas: () => quotas,
    usageHistory,
  };
}

/**
 * Opens the quota and application repositories of a process that owns them; on a failure, what was
 * opened is closed and Redis cut, before the error goes on.
 */
async function openOwned(
  loaded: LoadedConfig,
  role: Exclude<Role, { kind: 'worker' }>,
  env: Pick<Env, 'logger' | 'cwd'>,
  redis: RedisConnection | null,
): Promise<OwnedStores> {
  const { config } = loaded;
  const { logger, cwd } = env;
  let quotas: QuotaRepository | null = null;
  try {
    // Without Redis a gateway would fall back on its snapshot; a command must not read or write that.
    if (role.kind === 'command' && redis && !(await redisAnswers(redis)))
      throw new Error('Redis does not answer: nothing was read or written');
    quotas = await openQuotaRepository(config, redis, { logger, cwd, declare: role.kind !== 'command' });
    return { quotas, applications: await openApplicationRepository(config, redis, { logger, cwd }) };
  } catch (error) {
    await quotas?.close();
    redis?.disconnect();
    throw error;
  }
}
