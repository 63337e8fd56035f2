import { readFileSync } from 'node:fs';
import { Cluster, type Redis } from 'ioredis';
import type { RedisConnection } from '../redis/connect-redis.js';
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

const lua = (name: string) => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');

/** Larger than any limit: an addition is a consume that always has room. */
const unlimited = String(Number.MAX_SAFE_INTEGER);

/**
 * `store.type: "redis"`: counters shared by every gateway on one Redis (or Redis Cluster). One Lua
 * script decides a whole request in ONE round trip, with the Redis server's clock; all counter keys
 * share one hash tag, so the script runs on a cluster too; idle counters expire.
 */
export class RedisCounterStore implements CounterStore {
  private readonly keyPrefix: string;

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
    redis.defineCommand('quotagateConsume', { lua: lua('consume') });
    redis.defineCommand('quotagateUsage', { numberOfKeys: 1, lua: lua('usage') });
  }

  private get scripts(): CounterScripts {
    return this.redis as unknown as CounterScripts;
  }

  async consume(specs: readonly CounterSpec[]): Promise<Decision> {
    const keys = specs.map((spec) => this.keyPrefix + spec.key);
    const args = specs.flatMap((spec) => [
      String(spec.limit),
      String(bucketMsOf(spec.windowMs)),
      String(spec.cost),
      String(spec.need),
    ]);
    const reply = await this.scripts.quotagateConsume(
      keys.length,
      ...keys,
      String(bucketsPerWindow),
      this.now(),
      ...args,
    );
    return {
      allowed: reply[0] === 1,
      retryAfterMs: Number(reply[1]),
      states: specs.map((_spec, i) => ({
        used: Number(reply[2 + i * 2]),
        resetMs: Number(reply[3 + i * 2]),
      })),
    };
  }

  async add(additions: readonly CounterAddition[]): Promise<void> {
    const counted = additions.filter((addition) => addition.amount > 0);
    if (counted.length === 0) return;
    const keys = counted.map((addition) => this.keyPrefix + addition.key);
    const args = counted.flatMap((addition) => [
      unlimited,
      String(bucketMsOf(addition.windowMs)),
      String(addition.amount),
      '0',
    ]);
    await this.scripts.quotagateConsume(keys.length, ...keys, String(bucketsPerWindow), this.now(), ...args);
  }

  async usage(keyPrefix: string, windowMs: number): Promise<Array<{ key: string; used: number }>> {
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

  async close(): Promise<void> {}

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
