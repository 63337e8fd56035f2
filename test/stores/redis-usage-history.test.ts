import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageRow } from '../../src/quota/usage-history.js';
import { RedisUsageHistory, usageHistoryKeyOf } from '../../src/stores/redis-usage-history.js';
import { clusterTools, startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';

/**
 * The Redis store of the usage history: lines added with HINCRBY sum (a fleet's gateways add to the
 * same ones), a day's hash expires after the days kept, and a flush and a read each go to one node of a
 * Redis Cluster.
 */
const executable = await redisServerPath();
const tools = await clusterTools();

const row = (date: string, overrides: Partial<UsageRow> = {}): UsageRow => ({
  date,
  application: 'web',
  api: 'pets',
  method: 'getPet',
  admitted: 2,
  refused: 1,
  bytesIn: 10,
  bytesOut: 300,
  units: 7,
  ...overrides,
});

describe('RedisUsageHistory', () => {
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

  it('sums the lines added, reads them by day, application and API, and expires a day after the days kept', async () => {
    const prefix = `test:${randomUUID()}:`;
    const history = new RedisUsageHistory(connection, prefix, 30);
    const publicLine = row('2026-11-30', { application: null, method: null, admitted: 1, refused: 0 });
    await history.add([row('2026-11-29'), row('2026-11-30'), publicLine]);
    await history.add([row('2026-11-30', { units: 0, refused: 0 })]);
    expect(await history.read({ from: '2026-11-30', to: '2026-11-30' })).toEqual([
      publicLine,
      row('2026-11-30', { admitted: 4, refused: 1, bytesIn: 20, bytesOut: 600, units: 7 }),
    ]);
    expect(await history.read({ from: '2026-11-01', to: '2026-11-30', application: 'web' })).toHaveLength(2);
    expect(await history.read({ from: '2026-11-01', to: '2026-11-30', api: 'other' })).toEqual([]);
    const ttl = await connection.ttl(usageHistoryKeyOf(prefix, '2026-11-30'));
    expect(ttl).toBeGreaterThan(30 * 86_400);
    expect(ttl).toBeLessThanOrEqual(31 * 86_400);
  });
});

describe.runIf(tools)('RedisUsageHistory on Redis Cluster', () => {
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

  it('writes the days of one flush in one pipeline, and reads a range of days in another', async () => {
    const history = new RedisUsageHistory(connection, `test:${randomUUID()}:`, 400);
    const days = ['2026-11-28', '2026-11-29', '2026-11-30', '2026-12-01'];
    await history.add(days.map((date) => row(date)));
    expect(await history.read({ from: '2026-11-01', to: '2026-12-31' })).toEqual(
      days.map((date) => row(date)),
    );
  });
});
