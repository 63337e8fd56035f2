import { Cluster, type Redis } from 'ioredis';
import type { RedisConnection } from '../redis/connect-redis.js';
import { readLuaScript } from '../redis/lua-script.js';
import {
  bucketMsOf,
  bucketsPerWindow,
  type CounterAddition,
  type CounterSpec,
  type CounterStore,
  type Decision,
} from './counter-store.js';

interface CounterScripts {
  quotagateConsume(numberOfKeys: number, ...keysAndArgs: string[]): Promise<number[]>;
  quotagateUsage(key: string, buckets: string, bucketMs: string, now: string): Promise<number>;
}

/** Longest time measured units wait for a check to travel with. */
const flushAfterMs = 50;

/**
 * `store.type: "redis"`: counters shared by every gateway on one Redis (or Redis Cluster). One Lua
 * script decides a whole request in ONE round trip, with the Redis server's clock, and carries the
 * bytes measured since the previous one; all counter keys share one hash tag, so the script runs on a
 * cluster too; idle counters expire.
 */
export class RedisCounterStore implements CounterStore {
  private readonly keyPrefix: string;
  private readonly pending = new Map<string, { windowMs: number; amount: number }>();
  private flushTimer: NodeJS.Timeout | null = null;

  /**
   * @param clock only for tests, which move time instead of waiting: without it the Redis server's
   * clock decides, one clock for the whole fleet.
   */
  constructor(
    private readonly redis: RedisConnection,
    prefix: string,
    private readonly clock?: () => number,
  ) {
    this.keyPrefix = `${prefix}{counters}:`;
    // numberOfKeys is left out: each call says how many counters it checks.
    redis.defineCommand('quotagateConsume', { lua: readLuaScript(import.meta.url, 'consume') });
    redis.defineCommand('quotagateUsage', { numberOfKeys: 1, lua: readLuaScript(import.meta.url, 'usage') });
  }

  private get scripts(): CounterScripts {
    return this.redis as unknown as CounterScripts;
  }

  async consume(specs: readonly CounterSpec[]): Promise<Decision> {
    const reply = await this.send(specs);
    return {
      allowed: reply[0] === 1,
      retryAfterMs: Number(reply[1]),
      states: specs.map((_spec, i) => ({
        used: Number(reply[2 + i * 2]),
        resetMs: Number(reply[3 + i * 2]),
      })),
    };
  }

  /**
   * Queues the units: they travel with the next check of this gateway (so a request costs one round trip,
   * not two), or within `flushAfterMs` when no check comes.
   */
  async add(additions: readonly CounterAddition[]): Promise<void> {
    for (const { key, windowMs, amount } of additions) {
      if (amount > 0) this.queue(key, windowMs, amount);
    }
    if (this.pending.size > 0 && !this.flushTimer) {
      this.flushTimer = setTimeout(() => void this.flush(), flushAfterMs);
      this.flushTimer.unref();
    }
  }

  async usage(keyPrefix: string, windowMs: number): Promise<Array<{ key: string; used: number }>> {
    await this.flush();
    const pattern = `${escapeGlob(this.keyPrefix + keyPrefix)}*`;
    const nodes = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
    const keys = (await Promise.all(nodes.map((node) => scanAll(node, pattern)))).flat();
    const used = await Promise.all(
      keys.map((key) =>
        this.scripts.quotagateUsage(key, String(bucketsPerWindow), String(bucketMsOf(windowMs)), this.now()),
      ),
    );
    return keys
      .map((key, i) => ({ key: key.slice(this.keyPrefix.length), used: Number(used[i]) }))
      .filter(({ used: units }) => units > 0);
  }

  /** Sends the queued units now. */
  async flush(): Promise<void> {
    if (this.pending.size > 0) await this.send([]).catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.flush();
    if (this.flushTimer) clearTimeout(this.flushTimer);
  }

  private queue(key: string, windowMs: number, amount: number): void {
    this.pending.set(key, { windowMs, amount: (this.pending.get(key)?.amount ?? 0) + amount });
  }

  /** One script call: the queued additions, then the check. Additions that fail to travel stay queued. */
  private async send(specs: readonly CounterSpec[]): Promise<number[]> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const additions = [...this.pending];
    this.pending.clear();
    const keys = [
      ...specs.map((spec) => this.keyPrefix + spec.key),
      ...additions.map(([key]) => this.keyPrefix + key),
    ];
    const args = [
      String(bucketsPerWindow),
      this.now(),
      String(specs.length),
      ...specs.flatMap((spec) => [
        String(spec.limit),
        String(bucketMsOf(spec.windowMs)),
        String(spec.cost),
        String(spec.need),
      ]),
      ...additions.flatMap(([, { windowMs, amount }]) => [String(bucketMsOf(windowMs)), String(amount)]),
    ];
    try {
      return await this.scripts.quotagateConsume(keys.length, ...keys, ...args);
    } catch (error) {
      for (const [key, { windowMs, amount }] of additions) this.queue(key, windowMs, amount);
      throw error;
    }
  }

  private now(): string {
    return this.clock ? String(this.clock()) : '';
  }
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (char) => `\\${char}`);
}

async function scanAll(node: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}
