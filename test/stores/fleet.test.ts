import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { rmSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { clusterTools, startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import {
  adminUser,
  basicAuth,
  devKey,
  petsApiId,
  petsConfig,
  userAuth,
  writeSeedConfigDir,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const systemId = '00000000-0000-0000-0000-000000000000';
const applicationDefaultId = '00000000-0000-0000-0000-000000000001';
const adminHeaders = { authorization: userAuth(adminUser), 'content-type': 'application/json' };
const tools = await clusterTools();

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(() => upstream.close());

interface Fleet {
  gateways: Array<{ url: string; admin: string }>;
  stop(): Promise<void>;
}

/** `size` gateway processes (`gateway start`) sharing one store. */
async function startFleet(
  store: Record<string, unknown>,
  size: number,
  extra: Record<string, unknown> = {},
): Promise<Fleet> {
  const dir = writeSeedConfigDir(petsConfig(upstream.url, { store, ...extra }));
  const processes: CliProcess[] = [];
  const stop = async () => {
    for (const cli of processes) cli.child.kill('SIGTERM');
    await Promise.all(processes.map((cli) => cli.exited));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const gateways = await Promise.all(
      Array.from({ length: size }, async () => {
        const cli = spawnCli(['start', '--config-dir', dir]);
        processes.push(cli);
        const ports = await startedPorts(cli, 20_000);
        return {
          url: `http://127.0.0.1:${ports.http}`,
          admin: `http://127.0.0.1:${ports.admin}/api/portal/v1.3`,
        };
      }),
    );
    return { gateways, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

const perHour = (messages: number, api = '*') => ({
  api,
  method: '*',
  type: 'throttle',
  config: { messages, per: 1, period: 'hour' },
});

/** Sets the System quota on one gateway and waits until every gateway of the fleet has it. */
async function setSystemQuota(fleet: Fleet, messages: number): Promise<void> {
  await setQuotaEverywhere(fleet, systemId, {
    type: 'API',
    name: 'System',
    restrictions: [perHour(messages)],
  });
}

/** Replaces a well-known quota through one gateway and waits until every gateway of the fleet has it. */
async function setQuotaEverywhere(
  fleet: Fleet,
  id: string,
  quota: { type: string; name: string; restrictions: unknown[] },
): Promise<void> {
  const res = await fetch(`${fleet.gateways[0]!.admin}/quotas/${id}`, {
    method: 'PUT',
    headers: adminHeaders,
    body: JSON.stringify(quota),
  });
  expect(res.status).toBe(200);
  for (const gateway of fleet.gateways) {
    await expect
      .poll(
        async () => {
          const current = (await (
            await fetch(`${gateway.admin}/quotas/${id}`, { headers: adminHeaders })
          ).json()) as {
            restrictions: unknown[];
          };
          return current.restrictions.length;
        },
        { timeout: 1000, interval: 20 },
      )
      .toBe(quota.restrictions.length);
  }
}

/** `count` requests at once, spread over the fleet; answers the status of each. */
async function burst(
  fleet: Fleet,
  count: number,
  keyOf: (i: number) => string = () => devKey,
): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  try {
    return await Promise.all(
      Array.from(
        { length: count },
        (_, i) =>
          new Promise<number>((resolve, reject) => {
            const target = fleet.gateways[i % fleet.gateways.length]!.url;
            http
              .get(
                `${target}/pets/${i}`,
                { agent, headers: { authorization: basicAuth(keyOf(i)) } },
                (res) => {
                  res.resume();
                  res.on('end', () => resolve(res.statusCode ?? 0));
                },
              )
              .on('error', reject);
          }),
      ),
    );
  } finally {
    agent.destroy();
  }
}

async function expectExactLimit(store: Record<string, unknown>): Promise<void> {
  // This test is about the shared counters; a test machine busy with other suites must not push a
  // decision past its deadline into store.onError (redis-faults.test.ts covers that policy).
  const fleet = await startFleet({ ...store, commandTimeout: 2000 }, 4);
  try {
    await setSystemQuota(fleet, 50);
    const before = upstream.requests.length;
    const statuses = await burst(fleet, 200);
    expect(statuses.filter((status) => status === 200)).toHaveLength(50);
    expect(statuses.filter((status) => status === 429)).toHaveLength(150);
    expect(upstream.requests.length - before).toBe(50);
  } finally {
    await fleet.stop();
  }
}

describe('a fleet of gateways on one store', () => {
  it('4 gateway processes on one Redis: 200 concurrent requests against a limit of 50 → exactly 50 upstream hits', async () => {
    await expectExactLimit({ type: 'redis', url: inject('redisUrl'), prefix: `fleet:${randomUUID()}:` });
  }, 60_000);

  describe.runIf(tools)('on Redis Cluster', () => {
    let cluster: RedisCluster;
    beforeAll(async () => {
      cluster = await startRedisCluster(tools!);
    }, 30_000);
    afterAll(() => cluster?.stop());

    it('3 local masters: the same 4-gateway fleet admits exactly 50 of 200', async () => {
      await expectExactLimit({ type: 'redis', cluster: cluster.urls, prefix: `fleet:${randomUUID()}:` });
    }, 60_000);

    it('spreads counters over the masters by scope, and a burst whose checks span slots stays exact', async () => {
      const prefix = `spread:${randomUUID()}:`;
      const applications = ['a', 'b', 'c'].map((name) => ({
        id: randomUUID(),
        name,
        apikey_development: `${name}-key-0123456789abcdef0123456789`,
        apikey_production: `${name}-key-production-0123456789abcdef`,
      }));
      const fleet = await startFleet(
        { type: 'redis', cluster: cluster.urls, prefix, commandTimeout: 2000 },
        4,
        {
          applications,
        },
      );
      try {
        // Counters in four scopes: every API ({all}), the pets API, and each application.
        await setQuotaEverywhere(fleet, systemId, {
          type: 'API',
          name: 'System',
          restrictions: [perHour(1_000), perHour(1_000, petsApiId)],
        });
        await setQuotaEverywhere(fleet, applicationDefaultId, {
          type: 'APPLICATION',
          name: 'Application Default',
          restrictions: [perHour(20)],
        });
        const before = upstream.requests.length;
        // 60 requests per application at once over 4 gateways: each check spans 3 slots.
        const statuses = await burst(fleet, 180, (i) => applications[i % 3]!.apikey_development);
        expect(statuses.filter((status) => status === 200)).toHaveLength(60);
        expect(upstream.requests.length - before).toBe(60);
        for (const application of applications) {
          const own = statuses.filter(
            (status, i) => i % 3 === applications.indexOf(application) && status === 200,
          );
          expect(own).toHaveLength(20);
        }
        const holding = await Promise.all(
          cluster.urls.map(async (url) => {
            const node = new Redis(url);
            try {
              // Counters only: the fleet's rejection history, flushed every 5 s, and its usage history,
              // flushed every second, are no counters.
              return (await node.keys(`${prefix}*`)).filter(
                (key) =>
                  !key.includes('{quotas}') &&
                  !key.includes('{fleet}') &&
                  !key.startsWith(`${prefix}rejections:`) &&
                  !key.startsWith(`${prefix}usage:`),
              ).length;
            } finally {
              node.disconnect();
            }
          }),
        );
        expect(holding.reduce((sum, keys) => sum + keys, 0)).toBe(2 + 3);
        expect(holding.filter((keys) => keys > 0).length).toBeGreaterThanOrEqual(2);
      } finally {
        await fleet.stop();
      }
    }, 60_000);
  });
});
