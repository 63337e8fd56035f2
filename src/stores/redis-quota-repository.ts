import type { Logger } from '../observe/log.js';
import { duplicateConnection, firstConnection, type RedisConnection } from '../redis/connect-redis.js';
import {
  applicationIn,
  linkedTo,
  missingWellKnown,
  readDefinitionSet,
  wellKnownSet,
  type DefinitionSet,
} from '../quota/definition-set.js';
import type { DefinitionsSnapshot } from '../quota/definitions-snapshot.js';
import { wellKnownQuotas, type QuotaRecord, type StoredQuota } from '../quota/model.js';
import {
  QuotaConflict,
  QuotaNotFound,
  QuotaPreconditionFailed,
  QuotaStoreUnavailable,
  isStoredResets,
  resetGenerationsOf,
  type QuotaRepository,
  type QuotaWrite,
  type RefusedQuota,
  type StoredResets,
} from '../quota/quota-repository.js';
import { QuotaSnapshot } from '../quota/quota-snapshot.js';
import { planInUse } from '../quota/plans.js';
import { RedisDefinitions, type WriteReply } from './redis-definitions.js';
import { ReloadLoop, type Timers } from '../quota/reload-loop.js';
import { etagOf, replacing, serializeRecord, stored } from '../quota/stored-records.js';

/** @throws QuotaConflict when Redis refused a write of quota `id` for a rule of plans (plan-rules.lua). */
function refuseBrokenPlanRule(reply: WriteReply, id: string, plan: string | undefined): void {
  if (reply === 'NO_PLAN')
    throw new QuotaConflict(`quota '${plan}' is not a plan (an APPLICATION quota that no application owns)`);
  if (reply.startsWith('IN_USE:')) {
    const [, count, named] = /^IN_USE:(\d+):(.*)$/s.exec(reply) ?? [];
    throw new QuotaConflict(planInUse(id, JSON.parse(named ?? '[]') as string[], Number(count)));
  }
}

/**
 * The reset generations of the resets hash (application → JSON): an application whose text is not
 * generations (written by hand) keeps its counters at generation 0.
 */
function resetsOf(stored: Record<string, string>): StoredResets {
  const resets: StoredResets = {};
  for (const [application, json] of Object.entries(stored)) {
    let own: unknown;
    try {
      own = JSON.parse(json);
    } catch {
      continue;
    }
    if (isStoredResets({ [application]: own })) resets[application] = own as StoredResets[string];
  }
  return resets;
}

/** Retries of a write that raced with another writer and carried no If-Match of its own. */
const casAttempts = 5;

/**
 * Loads a reload may take: a restore (or one lost to a newer restore of another gateway), the creation of
 * missing well-known quotas, then the set to keep.
 */
const loadsPerReload = 4;

export interface RedisQuotaRepositoryOptions {
  /** Where this gateway keeps the last definitions it saw (`store.snapshotFile`); none when absent. */
  snapshot?: DefinitionsSnapshot;
  /** The timers of the reload's retries; the real ones when absent. */
  timers?: Timers;
}

/**
 * `store.type: "redis"`: definitions shared by every gateway on one Redis. Each write is one Lua script
 * (atomic, compare-and-set on the ETag) that raises the set's version and publishes the change; every
 * process reloads the set when told, and whenever its subscription or its connection (re)connects,
 * retrying a failed reload until one succeeds. A reload that finds the set gone (Redis restarted without
 * its data) puts back the newest set this gateway holds, from Redis earlier or from its snapshot file.
 */
export class RedisQuotaRepository extends QuotaSnapshot implements QuotaRepository {
  private readonly store: RedisDefinitions;
  private readonly snapshot: DefinitionsSnapshot | undefined;
  private readonly reloads: ReloadLoop;
  private subscriber: RedisConnection | null = null;
  /** The last set this process saw in Redis, or read from its snapshot: what it restores. */
  private held: DefinitionSet | null = null;
  /** The version of each refused definition already logged. */
  private readonly reported = new Map<string, string>();
  private readonly reloadSoon = () => this.reloads.request();

  constructor(
    private readonly redis: RedisConnection,
    prefix: string,
    private readonly logger: Logger,
    options: RedisQuotaRepositoryOptions = {},
  ) {
    super();
    this.store = new RedisDefinitions(redis, prefix);
    this.snapshot = options.snapshot;
    this.reloads = new ReloadLoop(() => this.reload(), {
      ...(options.timers ? { timers: options.timers } : {}),
      onFailure: (error, failures, retryInMs) => {
        // Once per outage: a retry every 2 s must not flood the log.
        if (failures > 1) return;
        this.logger.warn(
          { err: { message: error.message }, retryInMs },
          'cannot load the quota definitions from redis; retrying until it answers',
        );
      },
      onRecovery: (failures) =>
        this.logger.info({ failedAttempts: failures }, 'quota definitions loaded from redis again'),
    });
    this.records = new Map(wellKnownQuotas().map((record) => [record.quota.id, stored(record)]));
  }

  async open(): Promise<void> {
    const saved = (await this.snapshot?.read()) ?? null;
    if (saved) this.adopt(saved);
    const subscriber = duplicateConnection(this.redis);
    this.subscriber = subscriber;
    let subscribed = false;
    const subscribe = async () => {
      if (subscribed) return;
      await subscriber.subscribe(this.store.channel);
      // ioredis subscribes again by itself after later reconnections.
      subscribed = true;
    };
    subscriber.on('message', this.reloadSoon);
    subscriber.on('ready', () => {
      // A (re)connected subscriber may have missed changes: load the whole set again.
      subscribe().then(this.reloadSoon, this.reloadSoon);
    });
    subscriber.on('error', () => undefined);
    // The reload runs on this connection: while it is down every reload fails, so try again once it is up.
    this.redis.on('ready', this.reloadSoon);
    if (await firstConnection(subscriber, 2_000)) {
      await subscribe().catch((error: Error) =>
        this.logger.error({ err: { message: error.message } }, 'cannot subscribe to quota changes yet'),
      );
    }
    try {
      await this.reloads.run();
    } catch {
      if (saved) {
        this.logger.warn(
          { file: this.snapshot?.file, quotas: this.records.size, version: saved.version },
          'redis does not answer: enforcing the quota definitions of the local snapshot until it does',
        );
      } else {
        this.logger.error('redis does not answer: serving the well-known quotas (no limits) until it does');
      }
    }
    await this.warnAboutDurability();
  }

  async create(record: QuotaRecord): Promise<StoredQuota> {
    const json = serializeRecord(record);
    for (let attempt = 0; attempt < casAttempts; attempt += 1) {
      const reply = await this.run(() => this.store.create(record.quota.id, json, record.application));
      if (reply === 'OK') return this.applied([record])[0]!;
      if (reply === 'CONFLICT')
        throw new QuotaConflict(`application '${record.application}' already has a quota`);
      refuseBrokenPlanRule(reply, record.quota.id, record.plan);
      // EMPTY: Redis lost the set; put it back before adding to it.
      await this.reloadNow();
    }
    throw new QuotaStoreUnavailable('redis keeps losing the quota definitions; try again');
  }

  async replace(record: QuotaRecord, ifMatch?: string): Promise<StoredQuota> {
    const id = record.quota.id;
    for (let attempt = 0; attempt < casAttempts; attempt += 1) {
      const current = await this.current(id);
      if (ifMatch !== undefined && ifMatch !== current.etag) throw new QuotaPreconditionFailed(id);
      const next = replacing(record, current.application);
      const reply = await this.run(() => this.store.replace(id, serializeRecord(next), current.etag));
      if (reply === 'OK') return this.applied([next])[0]!;
      refuseBrokenPlanRule(reply, id, record.plan);
      if (reply === 'PRECONDITION' && ifMatch !== undefined) throw new QuotaPreconditionFailed(id);
      // Gone since the read (removed, or Redis lost the set): the next read tells which.
    }
    throw new QuotaStoreUnavailable(`quota '${id}' keeps changing under concurrent writers; try again`);
  }

  async remove(id: string, ifMatch?: string): Promise<void> {
    for (let attempt = 0; attempt < casAttempts; attempt += 1) {
      const current = await this.current(id);
      if (ifMatch !== undefined && ifMatch !== current.etag) throw new QuotaPreconditionFailed(id);
      const reply = await this.run(() => this.store.remove(id, current.etag, current.application));
      refuseBrokenPlanRule(reply, id, undefined);
      if (reply === 'OK') {
        const next = new Map(this.records);
        next.delete(id);
        this.refusedRecords.delete(id);
        const wellKnown = wellKnownQuotas().find((record) => record.quota.id === id);
        if (wellKnown) next.set(id, stored(wellKnown));
        this.publish(next);
        return;
      }
      if (reply === 'PRECONDITION' && ifMatch !== undefined) throw new QuotaPreconditionFailed(id);
    }
    throw new QuotaStoreUnavailable(`quota '${id}' keeps changing under concurrent writers; try again`);
  }

  async writeAll(writes: readonly QuotaWrite[]): Promise<void> {
    if (writes.length === 0) return;
    // A replacement keeps the application of the record it replaces (one the schema refuses too): the
    // ETag says it is the one read.
    const ownerOf = (id: string) => this.refusedRecords.get(id)?.application ?? this.get(id)?.application;
    const records = writes.map(({ record, etag }) =>
      etag === undefined ? record : replacing(record, ownerOf(record.quota.id)),
    );
    const definitions = records.map((record, i) => {
      const { etag } = writes[i]!;
      return {
        id: record.quota.id,
        json: serializeRecord(record),
        ...(etag === undefined ? { application: record.application } : { etag }),
      };
    });
    for (let attempt = 0; attempt < casAttempts; attempt += 1) {
      const [reply, id] = await this.run(() => this.store.writeAll(definitions));
      if (reply === 'OK') {
        this.applied(records);
        return;
      }
      if (reply === 'PRECONDITION') throw new QuotaPreconditionFailed(id);
      const record = records.find((candidate) => candidate.quota.id === id);
      if (reply === 'CONFLICT')
        throw new QuotaConflict(`application '${record?.application}' already has a quota`);
      refuseBrokenPlanRule(reply, id, record?.plan);
      // EMPTY: Redis lost the set; put it back before writing into it.
      await this.reloadNow();
    }
    throw new QuotaStoreUnavailable('redis keeps losing the quota definitions; try again');
  }

  async reset(application: string, keyBases: readonly string[]): Promise<void> {
    const json = await this.run(() => this.store.reset(application, keyBases));
    // This process moves to the fresh counters at once; the others when they reload on the change.
    const own = resetsOf({ [application]: json })[application];
    if (!own) return;
    const next = new Map(this.resetGenerations);
    next.set(application, new Map(Object.entries(own)));
    this.publish(new Map(this.records), next);
  }

  async close(): Promise<void> {
    this.redis.off('ready', this.reloadSoon);
    await this.reloads.close();
    if (this.subscriber) await this.subscriber.quit().catch(() => this.subscriber?.disconnect());
  }

  /**
   * The ETag and application of the current definition, read from Redis (not from this process's copy),
   * without judging it by the schema: a definition the schema refuses can still be replaced or removed.
   * One that is missing is looked for again after a reload, which puts back a set Redis lost and the
   * well-known quotas, so that those can always be replaced.
   */
  private async current(id: string): Promise<{ etag: string; application?: string }> {
    let json = await this.run(() => this.store.definition(id));
    if (json === null) {
      await this.reloadNow();
      json = await this.run(() => this.store.definition(id));
    }
    if (json === null) throw new QuotaNotFound(id);
    const named = applicationIn(json);
    const application =
      named === null ? linkedTo(id, await this.run(() => this.store.applications())) : named;
    return application === undefined ? { etag: etagOf(json) } : { etag: etagOf(json), application };
  }

  /** Makes writes visible to this process at once: its admin reads its own writes. */
  private applied(records: readonly QuotaRecord[]): StoredQuota[] {
    const next = new Map(this.records);
    const results = records.map((record) => {
      const result = stored(record);
      this.refusedRecords.delete(record.quota.id);
      next.set(record.quota.id, result);
      return result;
    });
    this.publish(next);
    return results;
  }

  private async run<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      this.logger.error({ err: { message: (error as Error).message } }, 'redis did not take a quota write');
      throw new QuotaStoreUnavailable('the quota store (redis) is unavailable; nothing was changed');
    }
  }

  private reloadNow(): Promise<void> {
    return this.run(() => this.reloads.run());
  }

  /**
   * Loads the whole set and makes it this process's (and its snapshot's). A set Redis has lost is first
   * restored from the one this gateway holds (the well-known quotas alone when it holds none), and so is
   * a restore of an older version than this gateway holds; missing well-known quotas are created. Each
   * may race with other gateways doing the same: the set is loaded again after each, and what is kept is
   * what Redis holds then.
   */
  private async reload(): Promise<void> {
    for (let load = 0; load < loadsPerReload; load += 1) {
      const { set, restored, resets } = await this.store.load();
      const empty = Object.keys(set.definitions).length === 0;
      if (empty || (restored && this.held !== null && this.held.version > set.version)) {
        await this.restore();
        continue;
      }
      const missing = missingWellKnown(set);
      if (missing.length > 0) {
        await this.store.ensure(missing);
        continue;
      }
      this.adopt(set, resetGenerationsOf(resetsOf(resets)));
      await this.snapshot?.save(set);
      return;
    }
    throw new Error('the quota definitions in redis kept changing during a reload');
  }

  private async restore(): Promise<void> {
    const held = this.held ?? wellKnownSet();
    if ((await this.store.restore(held)) === 'KEPT' || !this.held) return;
    this.logger.warn(
      { quotas: Object.keys(held.definitions).length, version: held.version },
      'redis had lost the quota definitions: restored the ones this gateway held',
    );
  }

  /**
   * Makes `set` the one this process enforces and holds. A definition the quota schema refuses is logged
   * (once per version), kept out of the set and listed by `refused()`.
   */
  private adopt(set: DefinitionSet, resets = this.resetGenerations): void {
    const { records, refused } = readDefinitionSet(set);
    for (const definition of refused.values()) this.report(definition);
    this.held = set;
    this.refusedRecords = refused;
    this.publish(records, resets);
  }

  private report(definition: RefusedQuota): void {
    if (this.reported.get(definition.id) === definition.etag) return;
    this.reported.set(definition.id, definition.etag);
    this.logger.error(
      { id: definition.id, problems: definition.problems },
      'a stored quota definition breaks the quota schema; it is not enforced',
    );
  }

  /** Definitions must outlive a Redis restart and must never be evicted: say so when they might not. */
  private async warnAboutDurability(): Promise<void> {
    try {
      const node = 'nodes' in this.redis ? this.redis.nodes('master')[0] : this.redis;
      if (!node) return;
      const [, appendonly] = (await node.config('GET', 'appendonly')) as [string, string];
      const [, save] = (await node.config('GET', 'save')) as [string, string];
      const [, policy] = (await node.config('GET', 'maxmemory-policy')) as [string, string];
      if (appendonly !== 'yes' && save.trim() === '') {
        this.logger.warn(
          'redis persistence is off (no AOF, no RDB snapshots): after a Redis restart, quota definitions come back only from the gateways that hold them',
        );
      }
      if (policy.startsWith('allkeys-')) {
        this.logger.warn(
          { policy },
          'redis maxmemory-policy may evict quota definitions; use noeviction or a volatile-* policy',
        );
      }
    } catch (error) {
      this.logger.warn(
        { err: { message: (error as Error).message } },
        'cannot check redis persistence settings (CONFIG GET refused)',
      );
    }
  }
}
