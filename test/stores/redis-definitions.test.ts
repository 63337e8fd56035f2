import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wellKnownSet, type DefinitionSet } from '../../src/quota/definition-set.js';
import { systemQuotaId, wellKnownQuotas } from '../../src/quota/model.js';
import { RedisDefinitions } from '../../src/stores/redis-definitions.js';
import { etagOf, serializeRecord } from '../../src/quota/stored-records.js';
import { clusterTools, startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';
import { sampleQuota } from '../helpers/quota-repository-contract.js';

const executable = await redisServerPath();
const tools = await clusterTools();
let redis: RedisProcess;
let connection: Redis;
beforeAll(async () => {
  redis = await startRedisProcess(executable!);
  connection = new Redis(redis.url);
});
afterAll(async () => {
  await connection.quit();
  await redis.stop();
});

/** The definitions of a fresh prefix, and a way to read its version hash as stored. */
function freshStore() {
  const prefix = `test:${randomUUID()}:`;
  return {
    prefix,
    store: new RedisDefinitions(connection, prefix),
    versionHash: () => connection.hgetall(`${prefix}{quotas}:version`),
  };
}

/** The well-known quotas and one quota named `name`, at `version`. */
function setAt(version: number, name: string): DefinitionSet {
  const quota = sampleQuota({ id: '11111111-2222-4333-8444-000000000abc', type: 'APPLICATION', name });
  const defaults = wellKnownSet();
  return {
    version,
    definitions: { ...defaults.definitions, [quota.id]: serializeRecord({ quota, application: 'web' }) },
    applications: { web: quota.id },
  };
}

describe('RedisDefinitions: versions and restores', () => {
  it('raises the version by one with every create, replace and remove', async () => {
    const { store } = freshStore();
    expect(await store.restore(wellKnownSet())).toBe('RESTORED');
    expect((await store.load()).set.version).toBe(-1);
    const quota = sampleQuota();
    const json = serializeRecord({ quota });
    expect(await store.create(quota.id, json, undefined)).toBe('OK');
    expect((await store.load()).set.version).toBe(0);
    const renamed = serializeRecord({ quota: { ...quota, name: 'renamed' } });
    expect(await store.replace(quota.id, renamed, etagOf(json))).toBe('OK');
    expect((await store.load()).set.version).toBe(1);
    expect(await store.remove(quota.id, etagOf(renamed), undefined)).toBe('OK');
    expect((await store.load()).set.version).toBe(2);
  });

  it('restores a set into an absent one, whole, and marks it as a restore', async () => {
    const { store, versionHash } = freshStore();
    expect(await store.restore(setAt(7, 'seven'))).toBe('RESTORED');
    expect(await store.load()).toEqual({ set: setAt(7, 'seven'), restored: true, resets: {} });
    expect(await versionHash()).toEqual({ version: '7', restored: '1' });
  });

  it('lets a newer restore replace an older one, never the reverse', async () => {
    const { store } = freshStore();
    expect(await store.restore(setAt(5, 'five'))).toBe('RESTORED');
    expect(await store.restore(setAt(7, 'seven'))).toBe('RESTORED');
    expect(await store.restore(setAt(5, 'five'))).toBe('KEPT');
    expect(await store.restore(setAt(7, 'other seven'))).toBe('KEPT');
    expect(await store.load()).toEqual({ set: setAt(7, 'seven'), restored: true, resets: {} });
  });

  it('never restores over a set that a write has touched, whatever its version', async () => {
    const { store, versionHash } = freshStore();
    await store.restore(setAt(5, 'five'));
    const quota = sampleQuota();
    expect(await store.create(quota.id, serializeRecord({ quota }), undefined)).toBe('OK');
    expect(await versionHash()).toEqual({ version: '6' });
    expect(await store.restore(setAt(9, 'nine'))).toBe('KEPT');
    expect(Object.keys((await store.load()).set.definitions)).toContain(quota.id);
  });

  it('never restores over a set stored before versions existed', async () => {
    const { prefix, store } = freshStore();
    await connection.hset(`${prefix}{quotas}:definitions`, wellKnownSet().definitions);
    expect((await store.load()).set.version).toBe(0);
    expect(await store.restore(setAt(3, 'three'))).toBe('KEPT');
  });

  it('lets any held set, even of version 0, replace the well-known quotas a gateway put into an empty Redis', async () => {
    const { store } = freshStore();
    expect(await store.restore(wellKnownSet())).toBe('RESTORED');
    expect(await store.restore(setAt(0, 'zero'))).toBe('RESTORED');
    expect((await store.load()).set.definitions).toEqual(setAt(0, 'zero').definitions);
  });

  it('refuses to create into a set Redis has lost, or to fill one with the well-known quotas', async () => {
    const { store } = freshStore();
    const quota = sampleQuota();
    expect(await store.create(quota.id, serializeRecord({ quota }), undefined)).toBe('EMPTY');
    expect(await store.ensure(wellKnownQuotas())).toBe('EMPTY');
    expect((await store.load()).set.definitions).toEqual({});
  });

  it('creates missing well-known quotas without counting a write, so a newer restore still wins', async () => {
    const { store, versionHash } = freshStore();
    const held = setAt(4, 'four');
    const { [systemQuotaId]: _system, ...withoutSystem } = held.definitions;
    await store.restore({ ...held, definitions: withoutSystem });
    expect(await store.ensure(wellKnownQuotas())).toBe('OK');
    expect((await store.load()).set.definitions[systemQuotaId]).toBe(
      wellKnownSet().definitions[systemQuotaId],
    );
    expect(await versionHash()).toEqual({ version: '4', restored: '1' });
    expect(await store.restore(setAt(5, 'five'))).toBe('RESTORED');
  });
});

describe.runIf(tools)('RedisDefinitions on Redis Cluster', () => {
  let cluster: RedisCluster;
  let connection: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster(tools!);
    connection = new Cluster(
      cluster.urls.map((url) => ({ host: '127.0.0.1', port: Number(new URL(url).port) })),
    );
  }, 30_000);
  afterAll(async () => {
    await connection?.quit();
    await cluster?.stop();
  });

  it('runs every script, whichever node owns the hash tag', async () => {
    const store = new RedisDefinitions(connection, `test:${randomUUID()}:`);
    expect(await store.restore(setAt(3, 'three'))).toBe('RESTORED');
    expect(await store.ensure(wellKnownQuotas())).toBe('OK');
    const quota = sampleQuota();
    const json = serializeRecord({ quota });
    expect(await store.create(quota.id, json, undefined)).toBe('OK');
    const renamed = serializeRecord({ quota: { ...quota, name: 'renamed' } });
    expect(await store.replace(quota.id, renamed, etagOf(json))).toBe('OK');
    expect(await store.remove(quota.id, etagOf(renamed), undefined)).toBe('OK');
    expect(await store.load()).toEqual({
      set: { ...setAt(3, 'three'), version: 6 },
      restored: false,
      resets: {},
    });
  });

  it('raises reset generations without a new version of the set, and loads them with it', async () => {
    const store = new RedisDefinitions(connection, `test:${randomUUID()}:`);
    expect(await store.restore(setAt(3, 'three'))).toBe('RESTORED');
    expect(JSON.parse(await store.reset('app-a', ['q:0:a:app:', 'q:0:b:app:']))).toEqual({
      'q:0:a:app:': 1,
      'q:0:b:app:': 1,
    });
    expect(JSON.parse(await store.reset('app-a', ['q:0:a:app:']))).toEqual({
      'q:0:a:app:': 2,
      'q:0:b:app:': 1,
    });
    const loaded = await store.load();
    // A reset is no write of a definition: the restore stays one that no write has touched.
    expect(loaded.set.version).toBe(3);
    expect(loaded.restored).toBe(true);
    expect(JSON.parse(loaded.resets['app-a']!)).toEqual({ 'q:0:a:app:': 2, 'q:0:b:app:': 1 });
  });
});
