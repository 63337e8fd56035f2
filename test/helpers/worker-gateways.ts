import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { afterAll, afterEach, beforeAll, expect, inject } from 'vitest';
import { spawnCli, startedPorts, type CliProcess } from './run-cli.js';
import {
  adminUser,
  basicAuth,
  devKey,
  petsConfig,
  quotaUsage,
  rejectedOf,
  systemQuotaId,
  throttle,
  userAuth,
  writeSeedConfigDir,
} from './test-gateway.js';
import { startUpstream, type TestUpstream } from './upstream.js';

/**
 * `workers: N` through the real CLI: a primary process and its node:cluster workers, on real ports of
 * 127.0.0.1, in front of one upstream per suite. Every process started is stopped by pid after each test.
 */
export interface WorkersGateway {
  cli: CliProcess;
  /** The config folder. */
  dir: string;
  url: string;
  admin: string;
  /** Every JSON log line the primary and its workers wrote so far. */
  logs(): Array<Record<string, unknown>>;
  /** Pids of the workers that said they started, in order. */
  workerPids(): number[];
}

export const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Pids of the processes whose command line names `dir` (a gateway started on that config folder). */
export function processesOf(dir: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Registers a workers suite's hooks: its upstream, and stops every gateway after each test. */
export function useWorkerGateways() {
  let upstream: TestUpstream;
  beforeAll(async () => {
    upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  });
  afterAll(() => upstream.close());

  const started: Array<{ cli: CliProcess; dir: string; gateway: () => WorkersGateway | null }> = [];
  afterEach(async () => {
    for (const { cli, dir, gateway } of started.splice(0)) {
      if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGTERM');
      await cli.exited;
      // A worker never outlives its primary; if one did, it is stopped here, by its pid.
      for (const pid of gateway()?.workerPids() ?? []) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** `gateway start` with `workers` and the pets API in front of the suite's upstream. */
  async function startGateway(extra: Record<string, unknown>): Promise<WorkersGateway> {
    const dir = writeSeedConfigDir(petsConfig(upstream.url, extra));
    const cli = spawnCli(['start', '--config-dir', dir]);
    let gateway: WorkersGateway | null = null;
    started.push({ cli, dir, gateway: () => gateway });
    const ports = await startedPorts(cli, 30_000);
    // SIGUSR2 has the workers write the access lines they gathered: a poll of the lines finds them.
    const logs = () => {
      if (cli.child.exitCode === null) cli.child.kill('SIGUSR2');
      return cli
        .stdout()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    };
    gateway = {
      cli,
      dir,
      url: `http://127.0.0.1:${ports.http}`,
      admin: `http://127.0.0.1:${ports.admin}`,
      logs,
      workerPids: () =>
        logs()
          .filter((line) => line.msg === 'worker started')
          .map((line) => line.pid as number),
    };
    // Each worker writes its started line through its own pipe, at times after the primary's: a test
    // starts once every worker has said it serves, so that the pids it reads are all there.
    const workers = typeof extra.workers === 'number' ? extra.workers : 1;
    if (workers > 1) await expect.poll(() => gateway!.workerPids().length, { timeout: 10_000 }).toBe(workers);
    return gateway;
  }

  /** `workers: 2` on a Redis store of their own, the System quota at `messages` an hour, both workers live. */
  async function startRedisWorkers(messages: number): Promise<WorkersGateway> {
    const gateway = await startGateway({
      workers: 2,
      store: {
        type: 'redis',
        url: inject('redisUrl'),
        prefix: `workers:${randomUUID()}:`,
        commandTimeout: 2000,
      },
    });
    await setSystemQuota(gateway, messages);
    await expect
      .poll(() => metricValue(gateway, /^quotagate_store_live_gateways (\d+)$/m), { timeout: 5_000 })
      .toBe(2);
    return gateway;
  }

  /** Access-log lines per worker id (of the requests the upstream saw come over `scheme`, when given). */
  function answeredByWorker(gateway: WorkersGateway, scheme?: 'http' | 'https'): Map<number, number> {
    const ids = new Set(
      upstream.requests
        .filter((seen) => seen.headers['x-forwarded-proto'] === scheme)
        .map((seen) => seen.headers['x-request-id']),
    );
    const counts = new Map<number, number>();
    for (const line of gateway.logs()) {
      if (line.component !== 'access') continue;
      if (scheme && !ids.has(line.requestId as string)) continue;
      const worker = line.worker as number;
      counts.set(worker, (counts.get(worker) ?? 0) + 1);
    }
    return counts;
  }

  /** Stops a `gateway start` the test spawned itself after the test, as the gateways started here are. */
  function stopAfterTest(cli: CliProcess, dir: string): void {
    started.push({ cli, dir, gateway: () => null });
  }

  return { startGateway, startRedisWorkers, answeredByWorker, stopAfterTest, upstream: () => upstream };
}

export async function setSystemQuota(gateway: WorkersGateway, messages: number): Promise<void> {
  const res = await fetch(`${gateway.admin}/api/portal/v1.3/quotas/${systemQuotaId}`, {
    method: 'PUT',
    headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'API', name: 'System', restrictions: [throttle(messages, 1, 'hour')] }),
  });
  expect(res.status).toBe(200);
}

/** `count` requests at once over up to 64 connections; answers the status of each. */
export async function burst(gateway: WorkersGateway, count: number, path = '/pets/1'): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  try {
    return await Promise.all(Array.from({ length: count }, () => get(gateway, path, agent)));
  } finally {
    agent.destroy();
  }
}

export function get(
  gateway: WorkersGateway,
  path: string,
  agent?: http.Agent,
  key = devKey,
): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(
        `${gateway.url}${path}`,
        { ...(agent ? { agent } : { agent: false }), headers: { authorization: basicAuth(key) } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      )
      .on('error', reject);
  });
}

export function httpsGet(port: number, ca: string): Promise<number> {
  return new Promise((resolve, reject) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port,
          path: '/pets/1',
          ca,
          agent: false,
          headers: { authorization: basicAuth(devKey) },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      )
      .on('error', reject);
  });
}

/** Access-log lines per worker id (of the requests the upstream saw come over `scheme`, when given). */

export async function metricValue(gateway: WorkersGateway, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${gateway.admin}/metrics`)).text();
  return Number(pattern.exec(text)?.[1] ?? Number.NaN);
}

/**
 * What the System quota's restriction has counted in its window, and what it rejected over the last five
 * minutes, as the admin port's usage says.
 */
export async function systemUsage(
  gateway: WorkersGateway,
): Promise<{ used: number | undefined; rejected: number }> {
  const [restriction] = (await quotaUsage(gateway.admin, systemQuotaId)).restrictions;
  return { used: restriction!.used, rejected: rejectedOf(restriction!) };
}

export const count = (statuses: number[], status: number) =>
  statuses.filter((each) => each === status).length;
