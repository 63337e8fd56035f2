import type { RedisConnection } from '../redis/connect-redis.js';
import { readLuaScript } from '../redis/lua-script.js';
import type { DefinitionSet } from '../quota/definition-set.js';
import type { QuotaRecord } from '../quota/model.js';
import { serializeRecord } from '../quota/stored-records.js';

/**
 * A write's answer: EMPTY when Redis has lost the whole set, which must be restored first; NO_PLAN and
 * IN_USE (with how many applications are on the plan, and the first ten) when it breaks a rule of plans
 * (plan-rules.lua).
 */
export type WriteReply =
  | 'OK'
  | 'CONFLICT'
  | 'NOT_FOUND'
  | 'PRECONDITION'
  | 'EMPTY'
  | 'NO_PLAN'
  | `IN_USE:${number}:${string}`;

/** One definition of a batch: its stored text, and the ETag it replaces (none: it is created). */
export interface DefinitionWrite {
  id: string;
  json: string;
  etag?: string;
  application?: string;
}

interface DefinitionScripts {
  quotaLoad(
    defs: string,
    apps: string,
    version: string,
    resets: string,
  ): Promise<[string[], string[], string, string, string[]]>;
  quotaReset(resets: string, application: string, channel: string, ...keyBases: string[]): Promise<string>;
  quotaRestore(defs: string, apps: string, version: string, ...args: string[]): Promise<'RESTORED' | 'KEPT'>;
  quotaEnsure(defs: string, channel: string, ...pairs: string[]): Promise<'OK' | 'EMPTY'>;
  quotaCreate(
    defs: string,
    apps: string,
    version: string,
    id: string,
    json: string,
    application: string,
    channel: string,
  ): Promise<WriteReply>;
  quotaReplace(
    defs: string,
    version: string,
    id: string,
    json: string,
    etag: string,
    channel: string,
  ): Promise<WriteReply>;
  quotaWriteAll(
    defs: string,
    apps: string,
    version: string,
    channel: string,
    ...writes: string[]
  ): Promise<[WriteReply, string]>;
  quotaRemove(
    defs: string,
    apps: string,
    version: string,
    id: string,
    etag: string,
    application: string,
    channel: string,
  ): Promise<WriteReply>;
}

const scripts: Array<
  [name: keyof DefinitionScripts, file: string, numberOfKeys: number, preludes?: string[]]
> = [
  ['quotaLoad', 'quota-load', 4],
  ['quotaReset', 'quota-reset', 1],
  ['quotaRestore', 'quota-restore', 3],
  ['quotaEnsure', 'quota-ensure', 1],
  ['quotaCreate', 'quota-create', 3, ['plan-rules']],
  ['quotaReplace', 'quota-replace', 2, ['plan-rules']],
  ['quotaRemove', 'quota-remove', 3, ['plan-rules']],
  ['quotaWriteAll', 'quota-write-all', 3, ['plan-rules']],
];

/**
 * The quota definitions in Redis under one prefix: the definitions hash (id → JSON), the applications
 * hash (application → id) and the version hash (`version`, and `restored` while the set is a restore
 * that no write has touched), and the resets hash (application → the JSON of its counters' reset
 * generations). One hash tag for all, so that every script runs on Redis Cluster.
 *
 * A restore leaves the resets out: Redis lost them with the counters, so the keys of generation 0 are as
 * fresh as the ones a reset moved to.
 * Each method is one command or one Lua script, and rejects when Redis does not answer.
 */
export class RedisDefinitions {
  readonly channel: string;
  private readonly keys: { defs: string; apps: string; version: string; resets: string };

  constructor(
    private readonly redis: RedisConnection,
    prefix: string,
  ) {
    this.keys = {
      defs: `${prefix}{quotas}:definitions`,
      apps: `${prefix}{quotas}:applications`,
      version: `${prefix}{quotas}:version`,
      resets: `${prefix}{quotas}:resets`,
    };
    this.channel = `${prefix}quotas:changes`;
    for (const [name, file, numberOfKeys, preludes] of scripts) {
      redis.defineCommand(name, { numberOfKeys, lua: readLuaScript(import.meta.url, file, preludes) });
    }
  }

  private get scripts(): DefinitionScripts {
    return this.redis as unknown as DefinitionScripts;
  }

  /**
   * The whole set at one moment (no definitions at all when Redis has lost them, or never had any), and
   * whether it is a restore that no write has touched since, and the reset generations (application →
   * JSON).
   */
  async load(): Promise<{ set: DefinitionSet; restored: boolean; resets: Record<string, string> }> {
    const { defs, apps, version, resets } = this.keys;
    const [definitions, applications, stored, restored, generations] = await this.scripts.quotaLoad(
      defs,
      apps,
      version,
      resets,
    );
    const set = {
      version: stored === '' ? 0 : Number(stored),
      definitions: pairsToRecord(definitions),
      applications: pairsToRecord(applications),
    };
    return { set, restored: restored === '1', resets: pairsToRecord(generations) };
  }

  /** Raises the reset generations of `application`'s counters under `keyBases`: its generations now (JSON). */
  reset(application: string, keyBases: readonly string[]): Promise<string> {
    return this.scripts.quotaReset(this.keys.resets, application, this.channel, ...keyBases);
  }

  /** Puts `set` back, marked as a restore, unless Redis holds a set that is not an older restore. */
  restore(set: DefinitionSet): Promise<'RESTORED' | 'KEPT'> {
    const { defs, apps, version } = this.keys;
    const definitions = Object.entries(set.definitions);
    return this.scripts.quotaRestore(
      defs,
      apps,
      version,
      String(set.version),
      this.channel,
      String(definitions.length),
      ...definitions.flat(),
      ...Object.entries(set.applications).flat(),
    );
  }

  /** Creates `records` (the missing well-known quotas) where absent, without counting it as a write. */
  ensure(records: QuotaRecord[]): Promise<'OK' | 'EMPTY'> {
    const pairs = records.flatMap((record) => [record.quota.id, serializeRecord(record)]);
    return this.scripts.quotaEnsure(this.keys.defs, this.channel, ...pairs);
  }

  create(id: string, json: string, application: string | undefined): Promise<WriteReply> {
    const { defs, apps, version } = this.keys;
    return this.scripts.quotaCreate(defs, apps, version, id, json, application ?? '', this.channel);
  }

  /** Compare and set on `etag`, the SHA-1 of the stored text. */
  replace(id: string, json: string, etag: string): Promise<WriteReply> {
    return this.scripts.quotaReplace(this.keys.defs, this.keys.version, id, json, etag, this.channel);
  }

  /**
   * Writes every definition of `writes` or none (quota-write-all.lua): the answer, and the id of the
   * write it refused.
   */
  writeAll(writes: readonly DefinitionWrite[]): Promise<[WriteReply, string]> {
    const { defs, apps, version } = this.keys;
    const args = writes.flatMap(({ id, json, etag, application }) => [
      id,
      json,
      etag ?? '',
      application ?? '',
    ]);
    return this.scripts.quotaWriteAll(defs, apps, version, this.channel, ...args);
  }

  remove(id: string, etag: string, application: string | undefined): Promise<WriteReply> {
    const { defs, apps, version } = this.keys;
    return this.scripts.quotaRemove(defs, apps, version, id, etag, application ?? '', this.channel);
  }

  /** The stored text of one definition, null when there is none. */
  definition(id: string): Promise<string | null> {
    return this.redis.hget(this.keys.defs, id);
  }

  applications(): Promise<Record<string, string>> {
    return this.redis.hgetall(this.keys.apps);
  }
}

/** HGETALL's flat reply inside a script (`[field, value, …]`) as an object of own keys. */
function pairsToRecord(pairs: string[]): Record<string, string> {
  const entries: Array<[string, string]> = [];
  for (let i = 0; i + 1 < pairs.length; i += 2) entries.push([pairs[i] ?? '', pairs[i + 1] ?? '']);
  return Object.fromEntries(entries);
}
