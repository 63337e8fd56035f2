import type { Logger } from '../log.js';
import { duplicateConnection, firstConnection, type RedisConnection } from '../redis/connect-redis.js';
import { readLuaScript } from '../redis/lua-script.js';
import { wellKnownQuotas, type QuotaRecord, type StoredQuota } from './model.js';
import {
  QuotaConflict,
  QuotaNotFound,
  QuotaPreconditionFailed,
  QuotaStoreUnavailable,
  type QuotaRepository,
  type RefusedQuota,
} from './quota-repository.js';
import { QuotaSnapshot } from './quota-snapshot.js';
import { etagOf, parseRecord, serializeRecord, stored } from './stored-records.js';

type ScriptReply = 'OK' | 'CONFLICT' | 'NOT_FOUND' | 'PRECONDITION';

interface QuotaScripts {
  quotaCreate(
    defs: string,
    apps: string,
    id: string,
    json: string,
    application: string,
    channel: string,
  ): Promise<ScriptReply>;
  quotaReplace(defs: string, id: string, json: string, etag: string, channel: string): Promise<ScriptReply>;
  quotaRemove(
    defs: string,
    apps: string,
    id: string,
    etag: string,
    application: string,
    channel: string,
  ): Promise<ScriptReply>;
}

/** Retries of a write that raced with another writer and carried no If-Match of its own. */
const casAttempts = 5;

/**
 * `store.type: "redis"`: definitions shared by every gateway on one Redis. Each write is one Lua script
 * (atomic, compare-and-set on the ETag) that also publishes the change; every process reloads the set
 * when told, and whenever its subscription (re)connects.
 */
export class RedisQuotaRepository extends QuotaSnapshot implements QuotaRepository {
  private readonly keys: { defs: string; apps: string; channel: string };
  private subscriber: RedisConnection | null = null;
  private reloading: Promise<void> | null = null;
  private reloadAgain = false;
  /** The version of each refused definition already logged. */
  private readonly reported = new Map<string, string>();

  constructor(
    private readonly redis: RedisConnection,
    prefix: string,
    private readonly logger: Logger,
  ) {
    super();
    // One hash tag for both keys, so that the scripts run on Redis Cluster too.
    this.keys = {
      defs: `${prefix}{quotas}:definitions`,
      apps: `${prefix}{quotas}:applications`,
      channel: `${prefix}quotas:changes`,
    };
    redis.defineCommand('quotaCreate', {
      numberOfKeys: 2,
      lua: readLuaScript(import.meta.url, 'quota-create'),
    });
    redis.defineCommand('quotaReplace', {
      numberOfKeys: 1,
      lua: readLuaScript(import.meta.url, 'quota-replace'),
    });
    redis.defineCommand('quotaRemove', {
      numberOfKeys: 2,
      lua: readLuaScript(import.meta.url, 'quota-remove'),
    });
    this.records = new Map(wellKnownQuotas().map((record) => [record.quota.id, stored(record)]));
  }

  private get scripts(): QuotaScripts {
    return this.redis as unknown as QuotaScripts;
  }

  async open(): Promise<void> {
    const subscriber = duplicateConnection(this.redis);
    this.subscriber = subscriber;
    let subscribed = false;
    const subscribe = async () => {
      if (subscribed) return;
      await subscriber.subscribe(this.keys.channel);
      // ioredis subscribes again by itself after later reconnections.
      subscribed = true;
    };
    subscriber.on('message', () => this.scheduleReload());
    subscriber.on('ready', () => {
      // A (re)connected subscriber may have missed changes: load the whole set again.
      subscribe().then(
        () => this.scheduleReload(),
        () => undefined,
      );
    });
    subscriber.on('error', () => undefined);
    if (await firstConnection(subscriber, 2_000)) {
      await subscribe().catch((error: Error) =>
        this.logger.error({ err: { message: error.message } }, 'cannot subscribe to quota changes yet'),
      );
    }
    try {
      await this.ensureWellKnown();
      await this.reload();
    } catch (error) {
      this.logger.error(
        { err: { message: (error as Error).message } },
        'cannot load quota definitions from redis yet; serving the well-known quotas until it answers',
      );
    }
    await this.warnAboutDurability();
  }

  async create(record: QuotaRecord): Promise<StoredQuota> {
    const json = serializeRecord(record);
    const reply = await this.run(() =>
      this.scripts.quotaCreate(
        this.keys.defs,
        this.keys.apps,
        record.quota.id,
        json,
        record.application ?? '',
        this.keys.channel,
      ),
    );
    if (reply === 'CONFLICT')
      throw new QuotaConflict(`application '${record.application}' already has a quota`);
    return this.applied(record);
  }

  async replace(record: QuotaRecord, ifMatch?: string): Promise<StoredQuota> {
    const id = record.quota.id;
    for (let attempt = 0; attempt < casAttempts; attempt += 1) {
      const current = await this.read(id);
      if (ifMatch !== undefined && ifMatch !== current.etag) throw new QuotaPreconditionFailed(id);
      const next: QuotaRecord = {
        quota: record.quota,
        ...(current.application ? { application: current.application } : {}),
      };
      const reply = await this.run(() =>
        this.scripts.quotaReplace(this.keys.defs, id, serializeRecord(next), current.etag, this.keys.channel),
      );
      if (reply === 'OK') return this.applied(next);
      if (reply === 'NOT_FOUND') throw new QuotaNotFound(id);
      if (ifMatch !== undefined) throw new QuotaPreconditionFailed(id);
    }
    throw new QuotaStoreUnavailable(`quota '${id}' keeps changing under concurrent writers; try again`);
  }

  async remove(id: string, ifMatch?: string): Promise<void> {
    for (let attempt = 0; attempt < casAttempts; attempt += 1) {
      const current = await this.read(id);
      if (ifMatch !== undefined && ifMatch !== current.etag) throw new QuotaPreconditionFailed(id);
      const reply = await this.run(() =>
        this.scripts.quotaRemove(
          this.keys.defs,
          this.keys.apps,
          id,
          current.etag,
          current.application ?? '',
          this.keys.channel,
        ),
      );
      if (reply === 'OK') {
        const next = new Map(this.records);
        next.delete(id);
        this.refusedRecords.delete(id);
        const wellKnown = wellKnownQuotas().find((record) => record.quota.id === id);
        if (wellKnown) next.set(id, stored(wellKnown));
        this.publish(next);
        return;
      }
      if (reply === 'NOT_FOUND') throw new QuotaNotFound(id);
      if (ifMatch !== undefined) throw new QuotaPreconditionFailed(id);
    }
    throw new QuotaStoreUnavailable(`quota '${id}' keeps changing under concurrent writers; try again`);
  }

  async close(): Promise<void> {
    await this.reloading?.catch(() => undefined);
    if (this.subscriber) await this.subscriber.quit().catch(() => this.subscriber?.disconnect());
  }

  /**
   * The ETag and application of the current definition, read from Redis (not from this process's copy),
   * without judging it by the schema: a definition the schema refuses can still be replaced or removed.
   */
  private async read(id: string): Promise<{ etag: string; application?: string }> {
    const json = await this.run(() => this.redis.hget(this.keys.defs, id));
    if (json === null) throw new QuotaNotFound(id);
    const named = applicationIn(json);
    const application =
      named === null ? linkedTo(id, await this.run(() => this.redis.hgetall(this.keys.apps))) : named;
    return application === undefined ? { etag: etagOf(json) } : { etag: etagOf(json), application };
  }

  /** Makes a write visible to this process at once: its admin reads its own writes. */
  private applied(record: QuotaRecord): StoredQuota {
    const result = stored(record);
    this.refusedRecords.delete(record.quota.id);
    this.publish(new Map(this.records).set(record.quota.id, result));
    return result;
  }

  private async run<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      this.logger.error({ err: { message: (error as Error).message } }, 'redis did not take a quota write');
      throw new QuotaStoreUnavailable('the quota store (redis) is unavailable; nothing was changed');
    }
  }

  private async ensureWellKnown(): Promise<void> {
    for (const record of wellKnownQuotas()) {
      const created = await this.redis.hsetnx(this.keys.defs, record.quota.id, serializeRecord(record));
      if (created === 1) await this.redis.publish(this.keys.channel, record.quota.id);
    }
  }

  private scheduleReload(): void {
    if (this.reloading) {
      this.reloadAgain = true;
      return;
    }
    this.reloading = this.reload()
      .catch((error: Error) =>
        this.logger.warn({ err: { message: error.message } }, 'reloading quota definitions failed'),
      )
      .finally(() => {
        this.reloading = null;
        if (this.reloadAgain) {
          this.reloadAgain = false;
          this.scheduleReload();
        }
      });
  }

  /**
   * Loads the whole set. A definition the quota schema refuses is logged, kept out of the set (a
   * well-known quota falls back to its empty default) and listed by `refused()`.
   */
  private async reload(): Promise<void> {
    const entries = await this.redis.hgetall(this.keys.defs);
    const records = new Map<string, StoredQuota>();
    const refused = new Map<string, RefusedQuota>();
    for (const [id, json] of Object.entries(entries)) {
      const result = readDefinition(id, json);
      if ('record' in result) {
        records.set(id, { ...result.record, etag: etagOf(json) });
        continue;
      }
      const etag = etagOf(json);
      refused.set(id, { id, etag, problems: result.problems, stored: json });
      // Once per version of a definition, not at every reload.
      if (this.reported.get(id) !== etag) {
        this.reported.set(id, etag);
        this.logger.error(
          { id, problems: result.problems },
          'a stored quota definition breaks the quota schema; it is not enforced',
        );
      }
    }
    if (refused.size > 0) {
      const links = await this.redis.hgetall(this.keys.apps);
      for (const definition of refused.values()) {
        const named = applicationIn(definition.stored);
        const application = named === null ? linkedTo(definition.id, links) : named;
        if (application !== undefined) definition.application = application;
      }
    }
    for (const record of wellKnownQuotas()) {
      if (!records.has(record.quota.id)) records.set(record.quota.id, stored(record));
    }
    this.refusedRecords = refused;
    this.publish(records);
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
          'redis persistence is off (no AOF, no RDB snapshots): quota definitions will not survive a Redis restart',
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

/** The stored text of quota `id` read through the quota schema: the record, or every problem it has. */
function readDefinition(id: string, json: string): { record: QuotaRecord } | { problems: string[] } {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return { problems: ['not JSON'] };
  }
  const parsed = parseRecord(value);
  if ('record' in parsed && parsed.record.quota.id !== id) {
    return { problems: [`id: must be '${id}', the key it is stored under`] };
  }
  return parsed;
}

/** The application linked to quota `id` in the applications hash (`links`): for a text that cannot tell. */
function linkedTo(id: string, links: Record<string, string>): string | undefined {
  return Object.entries(links).find(([, quotaId]) => quotaId === id)?.[0];
}

/**
 * The application a stored text names, whether or not the schema accepts the rest of it: undefined when
 * it is a JSON object that names none, null when it is no JSON object at all (and so cannot tell).
 */
function applicationIn(json: string): string | undefined | null {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const { application } = value as { application?: unknown };
  return typeof application === 'string' ? application : undefined;
}
