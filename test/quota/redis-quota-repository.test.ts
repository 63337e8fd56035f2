import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { RedisQuotaRepository } from '../../src/quota/redis-quota-repository.js';
import { describeQuotaRepositoryContract, sampleQuota } from './quota-repository-contract.js';

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

async function openRepository(prefix: string): Promise<RedisQuotaRepository> {
  const repository = new RedisQuotaRepository(connect(), prefix, logger);
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
    await repository.create({ quota: sampleQuota(), application: 'app' });
    const keys = await connect().keys(`${prefix}*`);
    expect(keys.length).toBe(2);
    for (const key of keys) expect(key).toMatch(new RegExp(`^${prefix}\\{quotas\\}:`));
    await repository.close();
  });
});
