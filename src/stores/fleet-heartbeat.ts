import { randomUUID } from 'node:crypto';
import type { Clock } from '../kit/clock.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { readLuaScript } from '../redis/lua-script.js';

interface HeartbeatScript {
  quotagateHeartbeat(key: string, id: string, ttlMs: string, now: string): Promise<string[]>;
}

export interface FleetHeartbeatOptions {
  clock: Clock;
  /** Milliseconds between heartbeats. */
  everyMs?: number;
  /** A gateway silent for this long is no longer counted. */
  ttlMs?: number;
  /** Only for tests: a time in ms for the script instead of the Redis server's clock. */
  storeClock?: () => number;
  /** Told the number of live gateways after every heartbeat that Redis answered. */
  onBeat?: (live: number) => void;
  /**
   * Sent with every heartbeat, whether Redis answered the last one or not: the writes that keep this
   * gateway's entries alive (its concurrency slots). A frozen Redis runs them as it wakes, before it
   * could expire the entries of a gateway that lived through the freeze.
   */
  keepAlive?: () => Promise<void>;
}

/**
 * Which gateways of the fleet are alive: each one beats in a sorted set on the shared Redis. Leases are
 * sized from it (no gateway takes more than its part of the room), and so is the fallback of
 * `onError: local`, which must keep a fleet that falls back together within the limit: while Redis is
 * away, each gateway enforces its share of every limit, computed from the last fleet it saw.
 */
export class FleetHeartbeat {
  readonly id = randomUUID();
  private members: string[] = [];
  private timer: unknown = null;
  private stopped = false;
  private readonly key: string;
  private readonly everyMs: number;
  /** A gateway silent for this long is no longer counted, and the concurrency slots it held are free. */
  readonly ttlMs: number;

  constructor(
    private readonly redis: RedisConnection,
    prefix: string,
    private readonly options: FleetHeartbeatOptions,
  ) {
    this.key = `${prefix}{fleet}:gateways`;
    this.everyMs = options.everyMs ?? 1_000;
    this.ttlMs = options.ttlMs ?? 3 * this.everyMs;
    redis.defineCommand('quotagateHeartbeat', {
      numberOfKeys: 1,
      lua: readLuaScript(import.meta.url, 'heartbeat', ['store-clock']),
    });
  }

  /** Beats now and then every `everyMs`, while Redis answers; resolves after the first beat. */
  async start(): Promise<void> {
    await this.beat();
  }

  /** Gateways alive as last seen (this one included). */
  live(): number {
    return Math.max(1, this.members.length);
  }

  /**
   * This gateway's part of `limit` while each gateway decides alone: limit ÷ live gateways, the
   * remainder going one unit each to the first gateways in id order, so the parts add up to the limit.
   */
  share(limit: number): number {
    const live = this.live();
    const rank = Math.max(0, this.members.indexOf(this.id));
    const base = Math.floor(limit / live);
    return base + (rank < limit - base * live ? 1 : 0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) this.options.clock.clearTimeout(this.timer);
    this.timer = null;
    await this.redis.zrem(this.key, this.id).catch(() => undefined);
  }

  private async beat(): Promise<void> {
    this.options.keepAlive?.().catch(() => undefined);
    try {
      const script = this.redis as unknown as HeartbeatScript;
      const now = this.options.storeClock ? String(this.options.storeClock()) : '';
      this.members = await script.quotagateHeartbeat(this.key, this.id, String(this.ttlMs), now);
      this.options.onBeat?.(this.live());
    } catch {
      // Redis away: the last fleet seen is the one whose shares the fallback enforces.
    } finally {
      if (!this.stopped) this.timer = this.options.clock.setTimeout(() => void this.beat(), this.everyMs);
    }
  }
}
