import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { Quota } from '../../src/quota/model.js';
import { QuotaPreconditionFailed } from '../../src/quota/quota-repository.js';
import { RedisQuotaRepository } from '../../src/stores/redis-quota-repository.js';
import { describeQuotaRepositoryContract, sampleQuota } from '../helpers/quota-repository-contract.js';
import { createLogger } from '../../src/observe/log.js';
import { capturingLogger } from '../helpers/log-capture.js';

const logger = createLogger({ level: 'silent' });
const connections: Redis[] = [];
const connect = () => {
  const connection = new Redis(inject('redisUrl'), { enableOfflineQueue: true });
  connections.push(connection);
  return connection;
};
afterAll(async () => {
  await Promise.all(connections.map((connection) => connection.quit()));
});

async function openRepository(prefix: string, log = logger): Promise<RedisQuotaRepository> {
  const repository = new RedisQuotaRepository(connect(), prefix, log);
  await repository.open();
  return repository;
}

describeQuotaRepositoryContract('redis', async () => {
  const prefix = `test:${randomUUID()}:`;
  const repository = await openRepository(prefix);
  return { repository, reopen: () => openRepository(prefix), close: () => repository.close() };
});

describe('RedisQuotaRepository', () => {
  it('shows a write of one process to another within a second', async () => {
    const prefix = `test:${randomUUID()}:`;
    const [writer, reader] = await Promise.all([openRepository(prefix), openRepository(prefix)]);
    const quota = sampleQuota();
    const started = Date.now();
    await writer.create({ quota });
    await expect
      .poll(() => reader.get(quota.id)?.quota.name, { timeout: 1000, interval: 10 })
      .toBe(quota.name);
    expect(Date.now() - started).toBeLessThan(1000);
    await writer.replace({ quota: { ...quota, name: 'renamed' } });
    await expect
      .poll(() => reader.get(quota.id)?.quota.name, { timeout: 1000, interval: 10 })
      .toBe('renamed');
    await writer.remove(quota.id);
    await expect.poll(() => reader.get(quota.id), { timeout: 1000, interval: 10 }).toBeUndefined();
    await Promise.all([writer.close(), reader.close()]);
  });

  it('shows a reset of one process to another as fast as a quota change', async () => {
    const prefix = `test:${randomUUID()}:`;
    const [writer, reader] = await Promise.all([openRepository(prefix), openRepository(prefix)]);
    await writer.reset('app-a', ['q:0:a:app:']);
    await expect
      .poll(() => reader.resets().get('app-a')?.get('q:0:a:app:'), { timeout: 1000, interval: 10 })
      .toBe(1);
    await Promise.all([writer.close(), reader.close()]);
  });

  it('lets concurrent writers without If-Match both land, one after the other', async () => {
    const prefix = `test:${randomUUID()}:`;
    const [a, b] = await Promise.all([openRepository(prefix), openRepository(prefix)]);
    const quota = sampleQuota();
    await a.create({ quota });
    await Promise.all([
      a.replace({ quota: { ...quota, description: 'from a' } }),
      b.replace({ quota: { ...quota, description: 'from b' } }),
    ]);
    const fresh = await openRepository(prefix);
    expect(['from a', 'from b']).toContain(fresh.get(quota.id)?.quota.description);
    await Promise.all([a.close(), b.close(), fresh.close()]);
  });

  it('keeps every key of one prefix under one hash tag, so its scripts run on Redis Cluster', async () => {
    const prefix = `test:${randomUUID()}:`;
    const repository = await openRepository(prefix);
    await repository.create({ quota: sampleQuota({ type: 'APPLICATION' }), application: 'app' });
    const keys = await connect().keys(`${prefix}*`);
    expect(keys.length).toBe(3);
    for (const key of keys) expect(key).toMatch(new RegExp(`^${prefix}\\{quotas\\}:`));
    await repository.close();
  });
});

describe('RedisQuotaRepository and stored definitions the quota schema refuses', () => {
  const mb = 'must be a number of megabytes from 0.000001 to 953674316.406249, with at most 6 decimals';

  /** Writes definitions into Redis as another (older, or broken) writer would, bypassing the schema. */
  async function storeRaw(prefix: string, definitions: Record<string, string>, applications = {}) {
    const redis = connect();
    await redis.hset(`${prefix}{quotas}:definitions`, definitions);
    if (Object.keys(applications).length > 0)
      await redis.hset(`${prefix}{quotas}:applications`, applications);
  }

  const withMb = (value: string, overrides: Partial<Quota> = {}) =>
    sampleQuota({
      restrictions: [
        { api: '*', method: '*', type: 'throttlemb', config: { mb: value, per: '1', period: 'day' } },
      ],
      ...overrides,
    });

  it('keeps them out of the quotas it serves, logs each, and lists each with its problems', async () => {
    const prefix = `test:${randomUUID()}:`;
    const tiny = withMb('1e-7');
    const huge = withMb('953674317', { type: 'APPLICATION' });
    const good = sampleQuota();
    const strangerId = randomUUID();
    await storeRaw(
      prefix,
      {
        [tiny.id]: JSON.stringify(tiny),
        [huge.id]: JSON.stringify({ ...huge, application: 'mobile' }),
        [good.id]: JSON.stringify(good),
        'not-json': '{"id": ',
        [strangerId]: JSON.stringify(sampleQuota()),
      },
      { mobile: huge.id },
    );
    const { lines, logger: log } = capturingLogger();
    const repository = await openRepository(prefix, log);
    try {
      expect(repository.get(good.id)?.quota).toEqual(good);
      for (const id of [tiny.id, huge.id, 'not-json', strangerId]) expect(repository.get(id)).toBeUndefined();
      expect(repository.ofApplication('mobile')).toBeUndefined();
      const refused = Object.fromEntries(repository.refused().map((record) => [record.id, record]));
      expect(Object.keys(refused).sort()).toEqual([tiny.id, huge.id, 'not-json', strangerId].sort());
      expect(refused[tiny.id]).toMatchObject({
        problems: [`restrictions[0].config.mb: ${mb}`],
        stored: JSON.stringify(tiny),
      });
      expect(refused[huge.id]).toMatchObject({
        application: 'mobile',
        problems: [`restrictions[0].config.mb: ${mb}`],
      });
      expect(refused['not-json']).toMatchObject({ problems: ['not JSON'], stored: '{"id": ' });
      expect(refused[strangerId]!.problems).toEqual([
        `id: must be '${strangerId}', the key it is stored under`,
      ]);
      const logged = lines.filter(
        (line) => line.msg === 'a stored quota definition breaks the quota schema; it is not enforced',
      );
      expect(logged.map((line) => line.id).sort()).toEqual([tiny.id, huge.id, 'not-json', strangerId].sort());
    } finally {
      await repository.close();
    }
  });

  it('lets a refused definition be replaced by a valid quota, keeping its application', async () => {
    const prefix = `test:${randomUUID()}:`;
    const broken = withMb('1e-7', { type: 'APPLICATION' });
    await storeRaw(
      prefix,
      { [broken.id]: JSON.stringify({ ...broken, application: 'web' }) },
      { web: broken.id },
    );
    const repository = await openRepository(prefix);
    const other = await openRepository(prefix);
    try {
      const etag = repository.refused()[0]!.etag;
      const fixed = withMb('0.000001', { id: broken.id, type: 'APPLICATION' });
      const replaced = await repository.replace({ quota: fixed }, etag);
      expect(replaced.application).toBe('web');
      expect(repository.refused()).toEqual([]);
      expect(repository.ofApplication('web')?.quota).toEqual(fixed);
      await expect.poll(() => other.ofApplication('web')?.quota.id).toBe(broken.id);
      expect(other.refused()).toEqual([]);
    } finally {
      await Promise.all([repository.close(), other.close()]);
    }
  });

  it('lets a refused definition be removed, freeing its application, even when it is not JSON', async () => {
    const prefix = `test:${randomUUID()}:`;
    const broken = withMb('1e-7', { type: 'APPLICATION' });
    await storeRaw(
      prefix,
      { [broken.id]: JSON.stringify({ ...broken, application: 'tv' }), junk: 'junk' },
      {
        tv: broken.id,
        radio: 'junk',
      },
    );
    const repository = await openRepository(prefix);
    try {
      await expect(repository.remove(broken.id, 'stale')).rejects.toBeInstanceOf(QuotaPreconditionFailed);
      await repository.remove(
        broken.id,
        repository.refused().find((record) => record.id === broken.id)!.etag,
      );
      await repository.remove('junk');
      expect(repository.refused()).toEqual([]);
      await repository.create({ quota: sampleQuota({ type: 'APPLICATION' }), application: 'tv' });
      await repository.create({ quota: sampleQuota({ type: 'APPLICATION' }), application: 'radio' });
      const fresh = await openRepository(prefix);
      expect(fresh.refused()).toEqual([]);
      expect(fresh.ofApplication('tv')).toBeDefined();
      await fresh.close();
    } finally {
      await repository.close();
    }
  });
});
