import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger, type Logger } from '../../src/observe/log.js';
import { firstConnection } from '../../src/redis/connect-redis.js';
import { wellKnownSet, type DefinitionSet } from '../../src/quota/definition-set.js';
import { DefinitionsSnapshot } from '../../src/quota/definitions-snapshot.js';
import {
  applicationDefaultQuotaId,
  systemQuotaId,
  wellKnownQuotas,
  type Quota,
  type Restriction,
} from '../../src/quota/model.js';
import { RedisDefinitions } from '../../src/stores/redis-definitions.js';
import { RedisQuotaRepository } from '../../src/stores/redis-quota-repository.js';
import type { Timers } from '../../src/quota/reload-loop.js';
import { serializeRecord } from '../../src/quota/stored-records.js';
import { redisServerPath, startRedisProcess, type RedisProcess } from '../helpers/redis-process.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { capturingLogger } from '../helpers/log-capture.js';
import { sampleQuota } from '../helpers/quota-repository-contract.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

const executable = await redisServerPath();
const silent = createLogger({ level: 'silent' });
const storeName = 'test store';
const folder = mkdtempSync(path.join(tmpdir(), 'quotagate-recovery-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

const defer = cleanupAfterEach();

async function privateRedis(): Promise<RedisProcess> {
  const redis = await startRedisProcess(executable!);
  defer(() => redis.stop());
  return redis;
}

/**
 * A connection as the gateway opens one (src/redis/connect-redis.ts): no offline queue, so a command
 * fails at once while it is down; it tries to reconnect every `retryMs`.
 */
function gatewayConnection(url: string, retryMs = 50): Redis {
  const connection = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 1_000,
    retryStrategy: () => retryMs,
  });
  connection.on('error', () => undefined);
  defer(async () => connection.disconnect());
  return connection;
}

/** A gateway connection that is up, as the gateway waits for one at start. */
async function readyConnection(url: string): Promise<Redis> {
  const connection = gatewayConnection(url);
  await firstConnection(connection, 2_000);
  return connection;
}

/** A client of the test's own that reads and edits the stored keys; it waits out restarts. */
function inspector(redis: RedisProcess, prefix: string) {
  const client = new Redis(redis.url);
  client.on('error', () => undefined);
  defer(async () => client.disconnect());
  return {
    client,
    defs: `${prefix}{quotas}:definitions`,
    version: () => client.hgetall(`${prefix}{quotas}:version`),
  };
}

async function openRepository(
  connection: Redis,
  prefix: string,
  options: { file?: string; logger?: Logger; timers?: Timers } = {},
): Promise<RedisQuotaRepository> {
  const logger = options.logger ?? silent;
  const repository = new RedisQuotaRepository(connection, prefix, logger, {
    ...(options.file ? { snapshot: new DefinitionsSnapshot(options.file, storeName, logger) } : {}),
    ...(options.timers ? { timers: options.timers } : {}),
  });
  await repository.open();
  defer(() => repository.close());
  return repository;
}

let files = 0;
function snapshotFile(): string {
  files += 1;
  return path.join(folder, `snapshot-${files}.json`);
}

const snapshotVersion = (file: string): number =>
  (JSON.parse(readFileSync(file, 'utf8')) as { version: number }).version;

const throttle = (messages: string): Restriction => ({
  api: '*',
  method: '*',
  type: 'throttle',
  config: { messages, per: '1', period: 'minute' },
});

const wellKnown = (id: string, restrictions: Restriction[] = []): Quota => ({
  ...wellKnownQuotas().find((record) => record.quota.id === id)!.quota,
  restrictions,
});

const heldQuotaId = '11111111-2222-4333-8444-00000000beef';

/** A set of `version`: System limited to `limit` a minute, and one quota named `name`. */
function setOf(version: number, name: string, limit = '100'): DefinitionSet {
  const quota = sampleQuota({ id: heldQuotaId, name });
  return {
    version,
    definitions: {
      ...wellKnownSet().definitions,
      [systemQuotaId]: serializeRecord({ quota: wellKnown(systemQuotaId, [throttle(limit)]) }),
      [quota.id]: serializeRecord({ quota }),
    },
    applications: {},
  };
}

async function writeSnapshot(set: DefinitionSet): Promise<string> {
  const file = snapshotFile();
  await new DefinitionsSnapshot(file, storeName, silent).save(set);
  return file;
}

const restoredMessage = 'redis had lost the quota definitions: restored the ones this gateway held';

describe('RedisQuotaRepository after a partition', () => {
  it('sees a change made while it was cut off, retrying the reload that failed when it came back', async () => {
    const redis = await privateRedis();
    const prefix = `test:${randomUUID()}:`;
    const main = gatewayConnection(redis.url, 1_000);
    // The subscription comes back long before the connection that reloads, as in the measured partition:
    // the reload that its return asks for fails with "Stream isn't writeable".
    Object.assign(main, { duplicate: () => gatewayConnection(redis.url, 100) });
    await firstConnection(main, 2_000);
    const { lines, logger } = capturingLogger();
    const cutOff = await openRepository(main, prefix, { logger });

    await redis.kill();
    await redis.restart();
    const writer = await openRepository(await readyConnection(redis.url), prefix);
    const quota = sampleQuota();
    await writer.create({ quota });
    expect(cutOff.get(quota.id)).toBeUndefined();

    await expect.poll(() => cutOff.get(quota.id)?.quota, { timeout: 10_000 }).toEqual(quota);
    const messages = lines.map((line) => line.msg);
    const failed = messages.indexOf(
      'cannot load the quota definitions from redis; retrying until it answers',
    );
    expect(failed).toBeGreaterThanOrEqual(0);
    expect(lines[failed]).toMatchObject({
      err: { message: expect.stringContaining("Stream isn't writeable") },
    });
    expect(messages.indexOf('quota definitions loaded from redis again')).toBeGreaterThan(failed);
  });

  it('retries the load of a gateway that started while Redis was down, on the timers it was given', async () => {
    const redis = await privateRedis();
    const prefix = `test:${randomUUID()}:`;
    await redis.kill();
    const timers = new FakeTimers();
    await openRepository(gatewayConnection(redis.url), prefix, { timers });
    expect(timers.waiting()).toEqual([100]);
    timers.advance(100);
    await expect.poll(() => timers.waiting()).toEqual([200]);
    timers.advance(200);
    await expect.poll(() => timers.waiting()).toEqual([400]);
    expect(timers.delays).toEqual([100, 200, 400]);

    await redis.restart();
    const { client, defs } = inspector(redis, prefix);
    await expect.poll(() => client.hkeys(defs), { timeout: 10_000 }).toHaveLength(2);
    expect(timers.waiting()).toEqual([]);
  });
});

describe('RedisQuotaRepository when Redis comes back without its data', () => {
  it('puts back the newest definitions its gateways hold, and PUT of a well-known quota works', async () => {
    const redis = await privateRedis();
    const prefix = `test:${randomUUID()}:`;
    const { lines, logger } = capturingLogger();
    const [fileA, fileB] = [snapshotFile(), snapshotFile()];
    const a = await openRepository(await readyConnection(redis.url), prefix, { file: fileA, logger });
    await a.replace({ quota: wellKnown(systemQuotaId, [throttle('100')]) });
    const first = sampleQuota();
    await a.create({ quota: first });
    const b = await openRepository(await readyConnection(redis.url), prefix, { file: fileB });
    await b.close();
    const second = sampleQuota();
    await a.create({ quota: second });
    await expect.poll(() => snapshotVersion(fileA)).toBe(snapshotVersion(fileB) + 1);
    const newest = snapshotVersion(fileA);

    await redis.kill();
    await redis.restart({ empty: true });
    // B starts again from its snapshot, one version behind A, which still holds the newest set.
    const b2 = await openRepository(await readyConnection(redis.url), prefix, { file: fileB });

    for (const repository of [a, b2]) {
      await expect.poll(() => repository.get(second.id)?.quota, { timeout: 10_000 }).toEqual(second);
      expect(repository.get(first.id)?.quota).toEqual(first);
      expect(repository.get(systemQuotaId)?.quota.restrictions).toEqual([throttle('100')]);
    }
    const { version } = inspector(redis, prefix);
    expect(await version()).toEqual({ version: String(newest), restored: '1' });
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 40, msg: restoredMessage, quotas: 4, version: newest }),
    );

    const etag = b2.get(systemQuotaId)?.etag;
    const replaced = await b2.replace({ quota: wellKnown(systemQuotaId, [throttle('50')]) }, etag);
    await expect.poll(() => a.get(systemQuotaId)?.etag).toBe(replaced.etag);
    expect(await version()).toEqual({ version: String(newest + 1) });
  });

  it('restores its snapshot into an empty Redis at start, instead of empty well-known quotas', async () => {
    const redis = await privateRedis();
    const prefix = `test:${randomUUID()}:`;
    const held = setOf(7, 'held');
    const { lines, logger } = capturingLogger();
    const repository = await openRepository(await readyConnection(redis.url), prefix, {
      file: await writeSnapshot(held),
      logger,
    });
    const { client, defs, version } = inspector(redis, prefix);
    expect(await client.hgetall(defs)).toEqual(held.definitions);
    expect(await version()).toEqual({ version: '7', restored: '1' });
    expect(repository.get(systemQuotaId)?.quota.restrictions).toEqual([throttle('100')]);
    expect(lines).toContainEqual(expect.objectContaining({ msg: restoredMessage, quotas: 3, version: 7 }));
  });

  it('ends with the newest set when two gateways restore different versions at once', async () => {
    const redis = await privateRedis();
    const [older, newer] = [await writeSnapshot(setOf(5, 'five')), await writeSnapshot(setOf(7, 'seven'))];
    for (const files of [
      [older, newer],
      [newer, older],
      [older, newer],
      [newer, older],
    ]) {
      const prefix = `test:${randomUUID()}:`;
      const repositories = await Promise.all(
        files.map(async (file) => openRepository(await readyConnection(redis.url), prefix, { file })),
      );
      for (const repository of repositories) {
        await expect.poll(() => repository.get(heldQuotaId)?.quota.name).toBe('seven');
      }
      expect(await inspector(redis, prefix).version()).toEqual({ version: '7', restored: '1' });
    }
  });

  it('puts its set over a restore of an older version, and takes a restore of a newer one', async () => {
    const redis = await privateRedis();
    for (const [inRedis, held, kept] of [
      [5, 7, 'seven'],
      [7, 5, 'seven'],
    ] as const) {
      const prefix = `test:${randomUUID()}:`;
      const names = { 5: 'five', 7: 'seven' } as const;
      await new RedisDefinitions(inspector(redis, prefix).client, prefix).restore(
        setOf(inRedis, names[inRedis]),
      );
      const repository = await openRepository(await readyConnection(redis.url), prefix, {
        file: await writeSnapshot(setOf(held, names[held])),
      });
      expect(repository.get(heldQuotaId)?.quota.name).toBe(kept);
      expect(await inspector(redis, prefix).version()).toEqual({
        version: String(Math.max(inRedis, held)),
        restored: '1',
      });
    }
  });

  it('restores the set it holds before a write lands on a Redis that lost it', async () => {
    const redis = await privateRedis();
    const prefix = `test:${randomUUID()}:`;
    const repository = await openRepository(await readyConnection(redis.url), prefix);
    const kept = sampleQuota();
    await repository.create({ quota: kept });
    const { client, defs } = inspector(redis, prefix);
    // Emptied behind the gateway's back: no change is published, so only the write finds out.
    await client.del(defs, `${prefix}{quotas}:applications`, `${prefix}{quotas}:version`);
    const added = sampleQuota();
    await repository.create({ quota: added });
    expect((await client.hkeys(defs)).sort()).toEqual(
      [systemQuotaId, applicationDefaultQuotaId, kept.id, added.id].sort(),
    );
    await client.del(defs);
    await repository.replace({ quota: { ...kept, name: 'renamed' } });
    expect((await client.hkeys(defs)).sort()).toEqual(
      [systemQuotaId, applicationDefaultQuotaId, kept.id, added.id].sort(),
    );
  });
});

describe('RedisQuotaRepository and the well-known quotas', () => {
  it('replaces a well-known quota that Redis lacks instead of answering that it does not exist', async () => {
    const redis = await privateRedis();
    const prefix = `test:${randomUUID()}:`;
    const repository = await openRepository(await readyConnection(redis.url), prefix);
    const { client, defs } = inspector(redis, prefix);
    await client.hdel(defs, applicationDefaultQuotaId);
    const quota = wellKnown(applicationDefaultQuotaId, [throttle('10')]);
    const replaced = await repository.replace({ quota }, repository.get(applicationDefaultQuotaId)?.etag);
    expect(replaced.quota).toEqual(quota);
    expect(await client.hget(defs, applicationDefaultQuotaId)).toBe(serializeRecord({ quota }));
  });

  it('creates the well-known quotas that a reload finds missing', async () => {
    const redis = await privateRedis();
    const prefix = `test:${randomUUID()}:`;
    await openRepository(await readyConnection(redis.url), prefix);
    const { client, defs } = inspector(redis, prefix);
    await client.hdel(defs, systemQuotaId);
    await client.publish(`${prefix}quotas:changes`, systemQuotaId);
    await expect.poll(() => client.hget(defs, systemQuotaId)).toBe(wellKnownSet().definitions[systemQuotaId]);
  });
});

describe('RedisQuotaRepository and its snapshot file', () => {
  it("enforces its snapshot's definitions when it starts while Redis is down, and logs it", async () => {
    const redis = await privateRedis();
    const prefix = `test:${randomUUID()}:`;
    const file = snapshotFile();
    const first = await openRepository(await readyConnection(redis.url), prefix, { file });
    const quota = sampleQuota();
    await first.create({ quota });
    await first.replace({ quota: wellKnown(systemQuotaId, [throttle('5')]) });
    await expect.poll(() => JSON.parse(readFileSync(file, 'utf8')).definitions).toHaveProperty(quota.id);
    await first.close();
    await redis.kill();

    const { lines, logger } = capturingLogger();
    const started = await openRepository(gatewayConnection(redis.url), prefix, { file, logger });
    expect(started.get(quota.id)?.quota).toEqual(quota);
    expect(started.get(systemQuotaId)?.quota.restrictions).toEqual([throttle('5')]);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 40,
        msg: 'redis does not answer: enforcing the quota definitions of the local snapshot until it does',
        quotas: 3,
        version: snapshotVersion(file),
      }),
    );

    await redis.restart({ empty: true });
    const { client, defs } = inspector(redis, prefix);
    await expect
      .poll(() => client.hget(defs, quota.id), { timeout: 10_000 })
      .toBe(serializeRecord({ quota }));
    expect(lines.map((line) => line.msg)).toContain(restoredMessage);
  });

  it('ignores a snapshot it cannot read, says so, and writes what Redis holds over it', async () => {
    const redis = await privateRedis();
    const prefix = `test:${randomUUID()}:`;
    const writer = await openRepository(await readyConnection(redis.url), prefix);
    const quota = sampleQuota();
    await writer.create({ quota });
    const file = snapshotFile();
    writeFileSync(file, '{"format": 1, "definitions":');
    const { lines, logger } = capturingLogger();
    const repository = await openRepository(await readyConnection(redis.url), prefix, { file, logger });
    expect(repository.get(quota.id)?.quota).toEqual(quota);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 40,
        msg: 'the quota snapshot is unusable; ignored',
        problem: 'not JSON',
      }),
    );
    expect(JSON.parse(readFileSync(file, 'utf8')).definitions[quota.id]).toBe(serializeRecord({ quota }));
  });
});
