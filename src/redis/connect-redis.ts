import type { Cluster, Redis } from 'ioredis';
import type { RedisStoreConfig, StoreConfig } from '../config/schema.js';
import type { Logger } from '../observe/log.js';

export type RedisConnection = Redis | Cluster;

/** Whether `connection` is a Redis Cluster's (told apart without loading ioredis's classes). */
export const isCluster = (connection: RedisConnection): connection is Cluster => connection.isCluster;

/**
 * The one Redis connection of a gateway process (a Cluster when `store.cluster` is set). A Redis outage
 * must never hang a request: commands fail fast instead of queueing while disconnected, and reconnection
 * happens in the background. ioredis is loaded here, on the first connection: a gateway on the memory
 * store never holds it in its heap (docs/performance.md).
 */
async function connectRedis(store: Readonly<RedisStoreConfig>, logger: Logger): Promise<RedisConnection> {
  const { Cluster, Redis } = await import('ioredis');
  const options = {
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    // A safety net for every command; counter decisions have their own, much shorter, store.commandTimeout.
    commandTimeout: Math.max(1_000, store.commandTimeout),
    connectTimeout: 2_000,
    maxRetriesPerRequest: 0,
  };
  const connection = store.cluster
    ? new Cluster(store.cluster.map(clusterNode), {
        redisOptions: { ...options, ...credentialsOf(store.cluster[0]!) },
        enableOfflineQueue: false,
        enableAutoPipelining: true,
      })
    : new Redis(store.url as string, options);
  let up = false;
  connection.on('ready', () => {
    up = true;
    logger.info('redis connected');
  });
  connection.on('error', (error: NodeJS.ErrnoException) => {
    if (up) logger.warn({ err: { code: error.code, message: error.message } }, 'redis connection lost');
    up = false;
  });
  return connection;
}

function clusterNode(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 6379) };
}

/** The credentials and TLS choice of a cluster's first URL, which every node shares. */
function credentialsOf(url: string): { username?: string; password?: string; tls?: object } {
  const parsed = new URL(url);
  return {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/** True when Redis answers PING within the command timeout. */
export async function redisAnswers(connection: RedisConnection): Promise<boolean> {
  try {
    return (await connection.ping()) === 'PONG';
  } catch {
    return false;
  }
}

/**
 * Resolves true once the connection is ready, false on its first error or after `timeoutMs`: the gateway
 * starts either way (store.onError decides what happens without Redis), but not before it has tried.
 */
export function firstConnection(connection: RedisConnection, timeoutMs: number): Promise<boolean> {
  if (connection.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const settle = (ready: boolean) => {
      clearTimeout(timer);
      connection.off('ready', onReady);
      connection.off('error', onError);
      resolve(ready);
    };
    const onReady = () => settle(true);
    const onError = () => settle(false);
    const timer = setTimeout(() => settle(false), timeoutMs);
    connection.once('ready', onReady);
    connection.once('error', onError);
  });
}

/** A second connection with the same settings, e.g. for a subscription (a subscribed connection can do nothing else). */
export function duplicateConnection(connection: RedisConnection): RedisConnection {
  return isCluster(connection) ? connection.duplicate() : connection.duplicate();
}

/**
 * The store's Redis connection when `store.type` is redis (null otherwise), once it is ready or has
 * had 2 s to be: the gateway starts either way, and store.onError decides what happens without Redis.
 */
export async function openStoreRedis(
  store: Readonly<StoreConfig>,
  logger: Logger,
): Promise<RedisConnection | null> {
  if (store.type !== 'redis') return null;
  const redis = await connectRedis(store, logger.child({ component: 'redis' }));
  if (!(await firstConnection(redis, 2_000)))
    logger.warn('redis is not reachable yet; retrying in the background');
  return redis;
}
