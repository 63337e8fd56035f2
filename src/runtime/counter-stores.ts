import { defaultCommandTimeoutMs, type Config } from '../config/schema.js';
import type { CounterTrips } from '../limiter/counter-trips.js';
import { Limiter } from '../limiter/limiter.js';
import { MemoryCounterStore } from '../limiter/memory-counter-store.js';
import { MemoryCounterTrips } from '../limiter/memory-counter-trips.js';
import { SharedCounterStore } from '../limiter/shared-counter-store.js';
import type { Metrics } from '../observe/metrics.js';
import type { RestrictionRejections } from '../observe/rejection-history.js';
import { redisAnswers, type RedisConnection } from '../redis/connect-redis.js';
import { FleetHeartbeat } from '../stores/fleet-heartbeat.js';
import { FleetRejections } from '../stores/fleet-rejections.js';
import { RedisCounterTrips } from '../stores/redis-counter-trips.js';
import { IpcCounterTrips } from '../workers/ipc-counter-trips.js';
import type { Closers } from './closers.js';
import type { Env } from './env.js';
import type { Role } from './role.js';

/** Where the counters of a data plane are shared: nowhere, in Redis, or in its primary over IPC. */
export type CounterBackend = 'memory' | 'redis' | 'ipc';

/**
 * Milliseconds a decision of the primary's counters may take before the limiter asks whether the primary
 * is still there; it is, while the channel is open, so a busy primary is waited for, never bypassed.
 */
export const primaryDecisionMs = 1_000;

/**
 * The one switch of the counters' backend (envoyproxy/ratelimit's `createLimiter`): Redis when the store
 * is Redis; the primary's, over IPC, for a worker of `workers: N` with the memory store; else this
 * process's memory.
 */
export function counterBackend(config: Pick<Config, 'store'>, role: Role): CounterBackend {
  if (config.store.type === 'redis') return 'redis';
  return role.kind === 'worker' && role.feeds.primaryCounters ? 'ipc' : 'memory';
}

/** The counters of a data plane, and the limiter that puts them behind `store.onError`. */
export interface CounterStores {
  backend: CounterBackend;
  /** This process's own counters: the store itself, or the fallback of `onError: local`. */
  local: MemoryCounterStore;
  limiter: Limiter;
  /** The gateways (or workers) sharing the counters, when they are shared. */
  liveGateways: (() => number) | null;
  /** The rejections the admin listener adds up: the fleet's when it can reach them, else this process's. */
  rejectionsOf(quotaId: string, restrictions: number): Promise<RestrictionRejections[][]>;
  /**
   * A worker's part of a quota's rejection history, for its primary to add up: all of it with the
   * memory store; with Redis, nothing (it hands its history over to the fleet's store first).
   */
  handOverRejections(quotaId: string): Promise<RestrictionRejections[]>;
}

/** What the counters need of the parts built before them. */
export interface CounterParts {
  redis: RedisConnection | null;
  metrics: Metrics;
}

/**
 * Builds the counters of a data plane (`single` or `worker`) on the backend `counterBackend` picks, starts
 * what keeps them shared (the fleet's heartbeat, the rejections' hand-over), and pushes their closers:
 * the limiter closes first (it hands back leases and measured units), this process's memory last.
 */
export async function createCounterStores(
  config: Config,
  role: Role,
  env: Env,
  parts: CounterParts,
  closers: Closers,
): Promise<CounterStores> {
  const { metrics, redis } = parts;
  const backend = counterBackend(config, role);
  const local = new MemoryCounterStore({
    ...(env.countersNow ? { now: env.countersNow } : {}),
    maxBytes: config.store.maxCounterMemoryMb * 1_048_576,
    onFull: () => metrics.counterStoreFull.inc(),
    onShadowDropped: () => metrics.shadowCountsDropped.inc(),
  });
  closers.push('memory counters', () => local.close());
  const shared = backend === 'redis' && redis && config.store.type === 'redis' ? config.store : null;
  const fleet = shared && redis ? await fleetParts(redis, shared.prefix, env, metrics, closers) : null;
  const feeds = backend === 'ipc' && role.kind === 'worker' ? role.feeds : null;
  const onTrip = () => metrics.counterStoreTrips.inc();
  const liveGateways = fleet ? () => fleet.heartbeat.live() : feeds ? () => feeds.workers : null;
  const limiter = new Limiter({
    shared: fleet
      ? new SharedCounterStore({
          trips: fleet.trips,
          // Tests move the counters' clock; a gateway's shared counters otherwise keep the Redis server's.
          clock: env.countersNow ? { ...env.fleetClock, now: env.countersNow } : env.fleetClock,
          live: () => fleet.heartbeat.live(),
          onTrip,
          refreshSlots: () => fleet.trips.refreshSlots(),
        })
      : feeds
        ? new SharedCounterStore({
            trips: new IpcCounterTrips(feeds.primary),
            clock: env.fleetClock,
            live: () => feeds.workers,
            onTrip,
          })
        : null,
    local,
    onError: shared?.onError ?? 'local',
    timeoutMs: feeds ? primaryDecisionMs : (shared?.commandTimeout ?? defaultCommandTimeoutMs),
    probe: () =>
      redis ? redisAnswers(redis) : feeds ? Promise.resolve(feeds.primary.open) : Promise.resolve(true),
    ...(fleet ? { shareOf: (limit: number) => fleet.heartbeat.share(limit) } : {}),
    logger: env.logger.child({ component: 'limiter' }),
    metrics,
  });
  // Unspent leases and measured bytes reach the fleet's counters before the connection closes.
  closers.push('limiter', () => limiter.close());
  const rejections = fleet?.rejections ?? null;
  return {
    backend,
    local,
    limiter,
    liveGateways,
    async rejectionsOf(quotaId, restrictions) {
      if (rejections) {
        try {
          await rejections.flush();
          return [await rejections.ofQuota(quotaId, restrictions)];
        } catch {
          // Redis is away: this gateway's own history is what there is.
        }
      }
      return [metrics.rejections.ofQuota(quotaId)];
    },
    async handOverRejections(quotaId) {
      if (!rejections) return metrics.rejections.ofQuota(quotaId);
      await rejections.flush();
      return [];
    },
  };
}

/** The counters a primary holds or reads for the admin listener's usage. */
export interface PrimaryCounterStores {
  /** The counters its worker processes share over IPC (the memory store, `workers: N`), else null. */
  trips: MemoryCounterTrips | null;
  /** Where the usage of a quota is read: these counters, Redis, or the data-plane thread's own. */
  usage: Pick<CounterTrips, 'usage'>;
  /** Bytes reserved by the counters held here. */
  reserved(): number;
}

/**
 * The primary's side of the same switch: with the memory store and worker processes it holds their
 * counters (they reach them over IPC); with one data-plane thread, the counters are the thread's (no lease
 * crosses threads), asked through `threadUsage`; with Redis, the admin listener reads them there.
 */
export function createPrimaryCounters(
  config: Config,
  role: Extract<Role, { kind: 'primary' }>,
  parts: CounterParts & { threadUsage: CounterTrips['usage'] },
  closers: Closers,
): PrimaryCounterStores {
  const { metrics, redis } = parts;
  const store =
    config.store.type === 'memory' && role.workers > 1
      ? new MemoryCounterStore({
          maxBytes: config.store.maxCounterMemoryMb * 1_048_576,
          onFull: () => metrics.counterStoreFull.inc(),
          onShadowDropped: () => metrics.shadowCountsDropped.inc(),
        })
      : null;
  if (store) closers.push('memory counters', () => store.close());
  const trips = store ? new MemoryCounterTrips(store) : null;
  return {
    trips,
    usage:
      trips ??
      (redis && config.store.type === 'redis'
        ? new RedisCounterTrips(redis, config.store.prefix)
        : { usage: parts.threadUsage }),
    reserved: () => store?.reserved ?? 0,
  };
}

/**
 * A gateway of a fleet that shares Redis: its heartbeat (which keeps its concurrency slots alive), the
 * trips to the counters, and its rejections handed over to the fleet's console.
 */
async function fleetParts(
  redis: RedisConnection,
  prefix: string,
  env: Env,
  metrics: Metrics,
  closers: Closers,
) {
  let trips: RedisCounterTrips | null = null;
  const heartbeat = new FleetHeartbeat(redis, prefix, {
    clock: env.fleetClock,
    onBeat: (live) => metrics.counterStoreLiveGateways.set(live),
    // Keeps this gateway's concurrency slots alive, and puts right a release that failed.
    keepAlive: async () => trips?.refreshSlots(),
  });
  trips = new RedisCounterTrips(redis, prefix, env.countersNow ?? undefined, {
    id: heartbeat.id,
    ttlMs: heartbeat.ttlMs,
  });
  const rejections = new FleetRejections(redis, prefix, metrics.rejections, { clock: env.fleetClock });
  closers.push('fleet rejections', () => rejections.stop());
  closers.push('fleet heartbeat', () => heartbeat.stop());
  await heartbeat.start();
  rejections.start();
  return { heartbeat, trips, rejections };
}
