import { Cluster, type Redis } from 'ioredis';
import type { RedisConnection } from '../redis/connect-redis.js';
import { readLuaScript } from '../redis/lua-script.js';
import {
  bucketMsOf,
  bucketsPerWindow,
  type CounterAddition,
  type CounterRef,
  type CounterState,
  type CounterUsage,
} from '../limiter/counter-store.js';
import type {
  CheckedCounter,
  CounterTrips,
  GiveBack,
  Trip,
  TripCheck,
  TripReply,
} from '../limiter/counter-trips.js';

/** The name the counter script is defined under on the connection. */
const counterScript = 'quotagateConsume';

interface CounterScripts {
  quotagateConsume(numberOfKeys: number, ...keysAndArgs: string[]): Promise<number[]>;
  quotagateUsage(key: string, buckets: string, bucketMs: string, now: string): Promise<[number, number]>;
}

/**
 * The shared counters on Redis or Redis Cluster: one Lua script per trip, atomic, on the Redis server's
 * clock. Counter keys carry a hash tag of their scope (an API, an application, or the one tag of
 * restrictions on every API): on a single Redis a trip is one script call whatever its tags; on a
 * cluster it is one call per tag, sent together, and when one of them refuses, the others' charges are
 * given back, so a trip across slots may briefly under-admit but never over-admits.
 */
export class RedisCounterTrips implements CounterTrips {
  private readonly spread: boolean;

  /**
   * @param clock only for tests, which move time instead of waiting: without it the Redis server's
   * clock decides, one clock for the whole fleet.
   */
  constructor(
    private readonly redis: RedisConnection,
    private readonly keyPrefix: string,
    private readonly clock?: () => number,
  ) {
    this.spread = redis instanceof Cluster;
    if (redis instanceof Cluster) {
      // ioredis places an auto-pipelined script by its first argument, which for a script called with a
      // variable number of keys is that number, not a key (redis/ioredis#2109): such calls to different
      // slots would share a pipeline and fail. They are sent on their own; ioredis reads the list at
      // each call, so the script that needs it says so here, where it is defined.
      const ignored = redis.options.autoPipeliningIgnoredCommands ?? [];
      if (!ignored.includes(counterScript))
        redis.options.autoPipeliningIgnoredCommands = [...ignored, counterScript];
    }
    // numberOfKeys is left out: each call says how many counters it touches.
    redis.defineCommand(counterScript, { lua: readLuaScript(import.meta.url, 'consume') });
    redis.defineCommand('quotagateUsage', { numberOfKeys: 1, lua: readLuaScript(import.meta.url, 'usage') });
  }

  private get scripts(): CounterScripts {
    return this.redis as unknown as CounterScripts;
  }

  async trip(trip: Trip): Promise<TripReply> {
    if (!this.spread) return this.send(trip);
    const groups = byHashTag(trip);
    if (groups.length === 1) return this.send(trip);
    const replies = await Promise.all(groups.map((group) => this.send(group.trip)));
    const checks: CheckedCounter[] = new Array<CheckedCounter>(trip.checks.length);
    groups.forEach((group, g) => group.positions.forEach((at, i) => (checks[at] = replies[g]!.checks[i]!)));
    const allowed = replies.every((reply) => reply.allowed);
    if (allowed) return { allowed, retryAfterMs: 0, checks };
    const giveBacks = groups.flatMap((group, g) =>
      replies[g]!.allowed ? chargesOf(group.trip.checks, replies[g]!.checks) : [],
    );
    // A give-back that does not arrive leaves units charged: fewer admissions, never more.
    if (giveBacks.length > 0)
      await this.trip({ checks: [], additions: [], giveBacks, live: trip.live }).catch(() => undefined);
    return {
      allowed,
      retryAfterMs: Math.max(...replies.map((reply) => reply.retryAfterMs)),
      checks: checks.map((checked) => ({ ...checked, leased: 0 })),
    };
  }

  async usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]> {
    const pattern = `${escapeGlob(this.keyPrefix + keyPrefix)}*`;
    const nodes = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
    const keys = (await Promise.all(nodes.map((node) => scanAll(node, pattern)))).flat();
    const states = await Promise.all(
      keys.map((key) =>
        this.scripts.quotagateUsage(key, String(bucketsPerWindow), String(bucketMsOf(windowMs)), this.now()),
      ),
    );
    return keys
      .map((key, i) => {
        const [used = 0, resetMs = 0] = states[i]!;
        return { key: key.slice(this.keyPrefix.length), used: Number(used), resetMs: Number(resetMs) };
      })
      .filter(({ used }) => used > 0);
  }

  async peek(counters: readonly CounterRef[]): Promise<CounterState[]> {
    const states = await Promise.all(
      counters.map(({ key, windowMs }) =>
        this.scripts.quotagateUsage(
          this.keyPrefix + key,
          String(bucketsPerWindow),
          String(bucketMsOf(windowMs)),
          this.now(),
        ),
      ),
    );
    return states.map(([used = 0, resetMs = 0]) => ({ used: Number(used), resetMs: Number(resetMs) }));
  }

  private async send(trip: Trip): Promise<TripReply> {
    const { checks, additions, giveBacks } = trip;
    const keys = [...checks, ...additions, ...giveBacks].map(({ key }) => this.keyPrefix + key);
    const args = [
      String(bucketsPerWindow),
      this.now(),
      String(checks.length),
      String(additions.length),
      String(trip.live),
      ...checks.flatMap((check) => [
        String(check.limit),
        String(bucketMsOf(check.windowMs)),
        String(check.cost),
        String(check.need),
        String(check.wanted),
      ]),
      ...additions.flatMap(({ windowMs, amount }) => [String(bucketMsOf(windowMs)), String(amount)]),
      ...giveBacks.flatMap(({ windowMs, bucket, units }) => [
        String(bucketMsOf(windowMs)),
        String(bucket),
        String(units),
      ]),
    ];
    const reply = await this.scripts.quotagateConsume(keys.length, ...keys, ...args);
    return {
      allowed: reply[0] === 1,
      retryAfterMs: Number(reply[1]),
      checks: checks.map((_check, i) => ({
        used: Number(reply[2 + i * 6]),
        resetMs: Number(reply[3 + i * 6]),
        leased: Number(reply[4 + i * 6]),
        bucket: Number(reply[5 + i * 6]),
        bucketLeftMs: Number(reply[6 + i * 6]),
        waitMs: Number(reply[7 + i * 6]),
      })),
    };
  }

  private now(): string {
    return this.clock ? String(this.clock()) : '';
  }
}

/** What a trip that was admitted charged to each counter, to give back. */
function chargesOf(checks: readonly TripCheck[], replies: readonly CheckedCounter[]): GiveBack[] {
  return checks.map((check, i) => ({
    key: check.key,
    windowMs: check.windowMs,
    bucket: replies[i]!.bucket,
    units: check.cost + replies[i]!.leased,
  }));
}

/** The hash tag Redis Cluster places a key by: the text between its first `{` and the next `}`. */
function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  const close = open === -1 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/** The trip split by hash tag (one slot each), with the position in `trip.checks` of each check. */
function byHashTag(trip: Trip): Array<{ trip: Trip; positions: number[] }> {
  const groups = new Map<
    string,
    { checks: TripCheck[]; positions: number[]; additions: CounterAddition[]; giveBacks: GiveBack[] }
  >();
  const groupOf = (key: string) => {
    const tag = hashTagOf(key);
    let group = groups.get(tag);
    if (!group) {
      group = { checks: [], positions: [], additions: [], giveBacks: [] };
      groups.set(tag, group);
    }
    return group;
  };
  trip.checks.forEach((check, i) => {
    const group = groupOf(check.key);
    group.checks.push(check);
    group.positions.push(i);
  });
  for (const addition of trip.additions) groupOf(addition.key).additions.push(addition);
  for (const giveBack of trip.giveBacks) groupOf(giveBack.key).giveBacks.push(giveBack);
  return [...groups.values()].map(({ checks, positions, additions, giveBacks }) => ({
    trip: { checks, additions, giveBacks, live: trip.live },
    positions,
  }));
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
