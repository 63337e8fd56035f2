import type { Redis } from 'ioredis';
import { isCluster } from '../redis/connect-redis.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { readLuaScript } from '../redis/lua-script.js';
import {
  bucketMsOf,
  bucketsPerWindow,
  isSlotCounter,
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
  quotagateSlotsHold(key: string, holder: string, held: string, ttlMs: string, now: string): Promise<number>;
  quotagateSlotsUsage(key: string, now: string): Promise<number>;
}

/** The gateway that takes concurrency slots through these trips, and how long its entries live unwritten. */
export interface SlotHolder {
  /** Its id in the fleet (the heartbeat's). */
  id: string;
  /** Milliseconds after its last write at which its slots count as free: the heartbeat's time to live. */
  ttlMs: number;
}

/** The functions of the scripts that read or write concurrency counters. */
const slotPrelude = ['store-clock', 'slot-entries'];

/**
 * The shared counters on Redis or Redis Cluster: one Lua script per trip, atomic, on the Redis server's
 * clock. Counter keys carry a hash tag of their scope (an API, an application, or the one tag of
 * restrictions on every API): on a single Redis a trip is one script call whatever its tags; on a
 * cluster it is one call per tag, sent together, and when one of them refuses, the others' charges are
 * given back, so a trip across slots may briefly under-admit but never over-admits.
 *
 * Concurrency slots are taken by the script with the other checks, under this gateway's holder entry,
 * and freed by writing the number this gateway holds (`slots-hold.lua`): at each release, and again at
 * every heartbeat (`refreshSlots`), which also keeps the entry alive. A write that fails, or a trip whose
 * answer is lost, is put right by the next heartbeat's: Redis may count a slot too many until then (never
 * one too few), and a gateway that dies stops writing, so its slots are free once its entry expires.
 * Slots the gateway took while Redis could not decide are counted in as held (`Trip.holds`), so the
 * number it writes is every request it has in flight, however its slot was taken.
 */
export class RedisCounterTrips implements CounterTrips {
  private readonly spread: boolean;
  /**
   * Slots this gateway holds by counter: counted when a check is sent, so that a heartbeat's write never
   * frees a slot the script may be taking. Kept at 0 until a write of 0 has reached Redis.
   */
  private readonly held = new Map<string, number>();

  /**
   * @param clock only for tests, which move time instead of waiting: without it the Redis server's
   * clock decides, one clock for the whole fleet.
   */
  constructor(
    private readonly redis: RedisConnection,
    private readonly keyPrefix: string,
    private readonly clock?: () => number,
    private readonly holder?: SlotHolder,
  ) {
    this.spread = isCluster(redis);
    if (isCluster(redis)) {
      // ioredis places an auto-pipelined script by its first argument, which for a script called with a
      // variable number of keys is that number, not a key (redis/ioredis#2109): such calls to different
      // slots would share a pipeline and fail. They are sent on their own; ioredis reads the list at
      // each call, so the script that needs it says so here, where it is defined.
      const ignored = redis.options.autoPipeliningIgnoredCommands ?? [];
      if (!ignored.includes(counterScript))
        redis.options.autoPipeliningIgnoredCommands = [...ignored, counterScript];
    }
    // numberOfKeys is left out: each call says how many counters it touches.
    redis.defineCommand(counterScript, { lua: readLuaScript(import.meta.url, 'consume', slotPrelude) });
    redis.defineCommand('quotagateUsage', {
      numberOfKeys: 1,
      lua: readLuaScript(import.meta.url, 'usage', ['store-clock']),
    });
    redis.defineCommand('quotagateSlotsHold', {
      numberOfKeys: 1,
      lua: readLuaScript(import.meta.url, 'slots-hold', slotPrelude),
    });
    redis.defineCommand('quotagateSlotsUsage', {
      numberOfKeys: 1,
      lua: readLuaScript(import.meta.url, 'slots-usage', slotPrelude),
    });
  }

  /**
   * Writes again how many slots this gateway holds of each counter it holds any of (or held since the
   * last write), which keeps its entries alive: called at every heartbeat, whether Redis answered the
   * last one or not (a frozen Redis runs the writes as it wakes, before its clock expires the entries),
   * and before the counters decide again after an outage.
   */
  async refreshSlots(): Promise<void> {
    await Promise.all([...this.held.keys()].map((key) => this.writeHeld(key)));
  }

  private get scripts(): CounterScripts {
    return this.redis as unknown as CounterScripts;
  }

  async trip(trip: Trip): Promise<TripReply> {
    if (trip.releases?.length || trip.holds?.length) await this.settle(trip.releases, trip.holds);
    if (trip.checks.length === 0 && trip.additions.length === 0 && trip.giveBacks.length === 0)
      return { allowed: true, retryAfterMs: 0, checks: [] };
    if (!this.spread) return this.send(trip);
    const groups = byHashTag(trip);
    if (groups.length === 1) return this.send(trip);
    const settled = await Promise.allSettled(groups.map((group) => this.send(group.trip)));
    const failed = settled.find((outcome) => outcome.status === 'rejected');
    if (failed) {
      // The request is decided without this trip: the slots its other parts took are freed.
      const taken = groups.flatMap((group, g) => {
        const outcome = settled[g]!;
        return outcome.status === 'fulfilled' && outcome.value.allowed ? slotKeysOf(group.trip.checks) : [];
      });
      if (taken.length > 0) await this.settle(taken).catch(() => undefined);
      throw failed.reason;
    }
    const replies = settled.map((outcome) => (outcome as PromiseFulfilledResult<TripReply>).value);
    const checks: CheckedCounter[] = new Array<CheckedCounter>(trip.checks.length);
    groups.forEach((group, g) => group.positions.forEach((at, i) => (checks[at] = replies[g]!.checks[i]!)));
    const allowed = replies.every((reply) => reply.allowed);
    if (allowed) return { allowed, retryAfterMs: 0, checks };
    const giveBacks = groups.flatMap((group, g) =>
      replies[g]!.allowed ? chargesOf(group.trip.checks, replies[g]!.checks) : [],
    );
    const slotsTaken = groups.flatMap((group, g) =>
      replies[g]!.allowed ? slotKeysOf(group.trip.checks) : [],
    );
    if (slotsTaken.length > 0) await this.settle(slotsTaken).catch(() => undefined);
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
    const nodes = isCluster(this.redis) ? this.redis.nodes('master') : [this.redis];
    const keys = (await Promise.all(nodes.map((node) => scanAll(node, pattern)))).flat();
    const states = await Promise.all(keys.map((key) => this.stateOf(key, windowMs)));
    return keys
      .map((key, i) => {
        const [used = 0, resetMs = 0] = states[i]!;
        return { key: key.slice(this.keyPrefix.length), used: Number(used), resetMs: Number(resetMs) };
      })
      .filter(({ used }) => used > 0);
  }

  async peek(counters: readonly CounterRef[]): Promise<CounterState[]> {
    const states = await Promise.all(
      counters.map(({ key, windowMs }) => this.stateOf(this.keyPrefix + key, windowMs)),
    );
    return states.map(([used = 0, resetMs = 0]) => ({ used: Number(used), resetMs: Number(resetMs) }));
  }

  /** What the counter at `key` (prefixed) holds now: units of its window, or slots held. */
  private async stateOf(key: string, windowMs: number): Promise<[number, number]> {
    if (isSlotCounter(windowMs)) return [Number(await this.scripts.quotagateSlotsUsage(key, this.now())), 0];
    return this.scripts.quotagateUsage(
      key,
      String(bucketsPerWindow),
      String(bucketMsOf(windowMs)),
      this.now(),
    );
  }

  /**
   * Frees one slot of each of `releases` (a key given twice frees two) and counts one of each of `holds`
   * (slots taken while Redis could not decide), then writes what this gateway holds of their counters.
   * Counted before the write: one that fails is put right by the next heartbeat's.
   */
  private async settle(releases: readonly string[] = [], holds: readonly string[] = []): Promise<void> {
    for (const key of releases) this.held.set(key, Math.max(0, (this.held.get(key) ?? 0) - 1));
    for (const key of holds) this.held.set(key, (this.held.get(key) ?? 0) + 1);
    await Promise.all([...new Set([...releases, ...holds])].map((key) => this.writeHeld(key)));
  }

  private async writeHeld(key: string): Promise<void> {
    const holder = this.slotHolder();
    const held = this.held.get(key) ?? 0;
    await this.scripts.quotagateSlotsHold(
      this.keyPrefix + key,
      holder.id,
      String(held),
      String(holder.ttlMs),
      this.now(),
    );
    if (held === 0 && this.held.get(key) === 0) this.held.delete(key);
  }

  private slotHolder(): SlotHolder {
    if (!this.holder) throw new Error('concurrency slots are taken only by trips that have a holder');
    return this.holder;
  }

  private async send(trip: Trip): Promise<TripReply> {
    const { additions, giveBacks } = trip;
    const checks = trip.checks.filter((check) => !isSlotCounter(check.windowMs));
    const slots = trip.checks.filter((check) => isSlotCounter(check.windowMs));
    const holder = slots.length > 0 ? this.slotHolder() : null;
    const keys = [...checks, ...additions, ...giveBacks, ...slots].map(({ key }) => this.keyPrefix + key);
    const args = [
      String(bucketsPerWindow),
      this.now(),
      String(checks.length),
      String(additions.length),
      String(trip.live),
      String(slots.length),
      holder?.id ?? '',
      String(holder?.ttlMs ?? 0),
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
      ...slots.map((slot) => String(slot.limit)),
    ];
    // Counted before the script runs: a heartbeat's write sent meanwhile must not free this slot.
    for (const { key } of slots) this.held.set(key, (this.held.get(key) ?? 0) + 1);
    let reply: number[];
    try {
      reply = await this.scripts.quotagateConsume(keys.length, ...keys, ...args);
    } catch (error) {
      // Taken or not, the next heartbeat writes what this gateway holds.
      for (const { key } of slots) this.held.set(key, this.held.get(key)! - 1);
      throw error;
    }
    const allowed = reply[0] === 1;
    if (!allowed) for (const { key } of slots) this.held.set(key, this.held.get(key)! - 1);
    const checked = (at: number): CheckedCounter => ({
      used: Number(reply[2 + at * 6]),
      resetMs: Number(reply[3 + at * 6]),
      leased: Number(reply[4 + at * 6]),
      bucket: Number(reply[5 + at * 6]),
      bucketLeftMs: Number(reply[6 + at * 6]),
      waitMs: Number(reply[7 + at * 6]),
    });
    let window = 0;
    let slot = checks.length;
    return {
      allowed,
      retryAfterMs: Number(reply[1]),
      checks: trip.checks.map((check) => checked(isSlotCounter(check.windowMs) ? slot++ : window++)),
    };
  }

  private now(): string {
    return this.clock ? String(this.clock()) : '';
  }
}

/** What a trip that was admitted charged to each counter, to give back. */
function chargesOf(checks: readonly TripCheck[], replies: readonly CheckedCounter[]): GiveBack[] {
  return checks.flatMap((check, i) =>
    isSlotCounter(check.windowMs)
      ? []
      : [
          {
            key: check.key,
            windowMs: check.windowMs,
            bucket: replies[i]!.bucket,
            units: check.cost + replies[i]!.leased,
          },
        ],
  );
}

/** The keys of the concurrency counters among `checks`. */
const slotKeysOf = (checks: readonly TripCheck[]): string[] =>
  checks.filter((check) => isSlotCounter(check.windowMs)).map((check) => check.key);

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
