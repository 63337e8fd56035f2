import { randomUUID } from 'node:crypto';
import { appendFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import {
  adminUser,
  basicAuth,
  devKey,
  petsConfig,
  systemQuotaId,
  throttle,
  userAuth,
  writeSeedConfigDir,
} from '../helpers/test-gateway.js';
import { createTestCertificate } from '../helpers/tls-cert.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * `workers: N` through the real CLI: a primary process and its node:cluster workers, on real ports of
 * 127.0.0.1. Every process started is stopped by pid after each test.
 */
let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream((req, res) => {
    const answer = () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    };
    if (req.url?.includes('slow')) setTimeout(answer, 600);
    else answer();
  });
});
afterAll(() => upstream.close());

interface Gateway {
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

const started: Array<{ cli: CliProcess; dir: string; gateway: () => Gateway | null }> = [];

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Pids of the processes whose command line names `dir` (a gateway started on that config folder). */
function processesOf(dir: string): number[] {
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

afterEach(async () => {
  for (const { cli, dir, gateway } of started.splice(0)) {
    if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGTERM');
    await cli.exited;
    // A worker never outlives its primary; if one did, it is stopped here, by its pid.
    for (const pid of gateway()?.workerPids() ?? []) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

/** `gateway start` with `workers` and the pets API in front of the test upstream. */
async function startGateway(extra: Record<string, unknown>): Promise<Gateway> {
  const dir = writeSeedConfigDir(petsConfig(upstream.url, extra));
  const cli = spawnCli(['start', '--config-dir', dir]);
  let gateway: Gateway | null = null;
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

async function setSystemQuota(gateway: Gateway, messages: number): Promise<void> {
  const res = await fetch(`${gateway.admin}/api/portal/v1.3/quotas/${systemQuotaId}`, {
    method: 'PUT',
    headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'API', name: 'System', restrictions: [throttle(messages, 1, 'hour')] }),
  });
  expect(res.status).toBe(200);
}

/** `count` requests at once over up to 64 connections; answers the status of each. */
async function burst(gateway: Gateway, count: number, path = '/pets/1'): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  try {
    return await Promise.all(Array.from({ length: count }, () => get(gateway, path, agent)));
  } finally {
    agent.destroy();
  }
}

function get(gateway: Gateway, path: string, agent?: http.Agent, key = devKey): Promise<number> {
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

function httpsGet(port: number, ca: string): Promise<number> {
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
function answeredByWorker(gateway: Gateway, scheme?: 'http' | 'https'): Map<number, number> {
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

async function metricValue(gateway: Gateway, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${gateway.admin}/metrics`)).text();
  return Number(pattern.exec(text)?.[1] ?? Number.NaN);
}

/**
 * What the System quota's restriction has counted in its window, and what it rejected over the last five
 * minutes, as the admin port's usage says.
 */
async function systemUsage(gateway: Gateway): Promise<{ used: number; rejected: number }> {
  const res = await fetch(`${gateway.admin}/api/portal/v1.3/quotas/${systemQuotaId}/usage`, {
    headers: { authorization: userAuth(adminUser) },
  });
  const usage = (await res.json()) as {
    restrictions: Array<{ used: number; rejections: { counts: number[] } }>;
  };
  const [restriction] = usage.restrictions;
  return { used: restriction!.used, rejected: restriction!.rejections.counts.reduce((a, b) => a + b, 0) };
}

/** `workers: 2` on a Redis store of their own, the System quota at `messages` an hour, both workers live. */
async function startRedisWorkers(messages: number): Promise<Gateway> {
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
    .poll(() => metricValue(gateway, /^quotagate_counter_store_live_gateways (\d+)$/m), { timeout: 5_000 })
    .toBe(2);
  return gateway;
}

const count = (statuses: number[], status: number) => statuses.filter((each) => each === status).length;

describe('workers: 2', () => {
  it('with the memory store: 200 concurrent requests against a limit of 50 → exactly 50 reach the upstream, served by both workers', async () => {
    const gateway = await startGateway({ workers: 2 });
    expect(gateway.workerPids()).toHaveLength(2);
    await setSystemQuota(gateway, 50);
    const before = upstream.requests.length;
    const statuses = await burst(gateway, 200);
    expect(count(statuses, 200)).toBe(50);
    expect(count(statuses, 429)).toBe(150);
    expect(upstream.requests.length - before).toBe(50);
    await expect.poll(() => [...answeredByWorker(gateway).values()].reduce((a, b) => a + b, 0)).toBe(200);
    expect([...answeredByWorker(gateway).keys()].sort()).toEqual([1, 2]);
    // The console's usage: the counter the primary holds, and the rejections of both workers added up.
    expect(await systemUsage(gateway)).toEqual({ used: 50, rejected: 150 });
  }, 60_000);

  // The primary sends the change down each worker's IPC channel before it answers the DELETE, and a
  // worker reads its channel in order: a request the client can only send after the 204 comes later.
  it('refuses a key revoked through the admin port on every worker, on connections they already hold open', async () => {
    const gateway = await startGateway({ workers: 2 });
    const admin = async (method: string, target: string, body?: unknown) => {
      const res = await fetch(`${gateway.admin}/api/portal/v1.3${target}`, {
        method,
        headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, string> };
    };
    const app = await admin('POST', '/applications', { name: 'Partner portal' });
    expect(app.status).toBe(201);
    const made = await admin('POST', `/applications/${app.body.id}/apikeys`, {});
    expect(made.status).toBe(201);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    try {
      const through = () =>
        Promise.all(Array.from({ length: 32 }, () => get(gateway, '/pets/1', agent, made.body.key)));
      expect(count(await through(), 200)).toBe(32);
      await expect.poll(() => answeredByWorker(gateway).size).toBe(2);
      expect(
        (await admin('DELETE', `/applications/${app.body.id}/apikeys/${made.body.id}`, undefined)).status,
      ).toBe(204);
      expect(count(await through(), 401)).toBe(32);
    } finally {
      agent.destroy();
    }
  }, 60_000);

  it('shares the HTTP and HTTPS ports, each bound once: the started line names them, and both workers answer on each', async () => {
    const certificate = await createTestCertificate();
    try {
      const gateway = await startGateway({
        workers: 2,
        tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
      });
      const line = gateway.logs().find((each) => each.msg === 'gateway started')!;
      expect(line).toMatchObject({ workers: 2, store: 'memory' });
      const shared = line.ports as { http: number; https: number };
      expect(shared.https).not.toBe(shared.http);
      // Each worker writes its own line, through its own pipe: it may arrive after the primary's.
      await expect
        .poll(() =>
          gateway
            .logs()
            .filter((each) => each.msg === 'worker started')
            .map((each) => each.ports),
        )
        .toEqual([
          { ...shared, admin: Number(new URL(gateway.admin).port) },
          { ...shared, admin: Number(new URL(gateway.admin).port) },
        ]);
      // A new connection per request: node:cluster hands connections to the workers in turn.
      for (let i = 0; i < 10; i += 1) expect(await get(gateway, '/pets/1')).toBe(200);
      for (let i = 0; i < 10; i += 1) expect(await httpsGet(shared.https, certificate.cert)).toBe(200);
      await expect.poll(() => answeredByWorker(gateway, 'http').size).toBe(2);
      await expect.poll(() => answeredByWorker(gateway, 'https').size).toBe(2);
    } finally {
      rmSync(certificate.dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('/metrics and /latency on the admin port add up the requests of every worker', async () => {
    const gateway = await startGateway({ workers: 2 });
    for (let i = 0; i < 30; i += 1) expect(await get(gateway, '/pets/1')).toBe(200);
    await expect.poll(() => [...answeredByWorker(gateway).values()].reduce((a, b) => a + b, 0)).toBe(30);
    const perWorker = [...answeredByWorker(gateway).values()];
    expect(perWorker).toHaveLength(2);
    expect(Math.min(...perWorker)).toBeGreaterThan(0);
    expect(await metricValue(gateway, /^quotagate_requests_total\{[^}]*status="200"\} (\d+)$/m)).toBe(30);
    expect(await metricValue(gateway, /^quotagate_request_duration_seconds_count\{[^}]*\} (\d+)$/m)).toBe(30);
    expect(
      await metricValue(gateway, /^quotagate_added_latency_seconds_count\{part="request"\} (\d+)$/m),
    ).toBe(30);
    const latency = (await (await fetch(`${gateway.admin}/latency`)).json()) as {
      request: { count: number };
      response: { count: number };
    };
    expect([latency.request.count, latency.response.count]).toEqual([30, 30]);
    expect(await metricValue(gateway, /^quotagate_workers_listening (\d+)$/m)).toBe(2);
    expect(await metricValue(gateway, /^quotagate_counter_store_shared (\d+)$/m)).toBe(1);
  }, 60_000);

  it('replaces a killed worker; the gateway keeps answering, and the counts the primary holds survive', async () => {
    const gateway = await startGateway({ workers: 2 });
    await setSystemQuota(gateway, 10);
    const first = await burst(gateway, 6);
    expect(count(first, 200)).toBe(6);
    const [victim] = gateway.workerPids();
    process.kill(victim!, 'SIGKILL');
    await gateway.cli.waitFor('"msg":"worker exited; starting another"');
    // The other worker serves alone meanwhile.
    const meanwhile = [];
    for (let i = 0; i < 3; i += 1) meanwhile.push(await get(gateway, '/pets/1'));
    expect(meanwhile).toEqual([200, 200, 200]);
    await expect.poll(() => gateway.workerPids().length, { timeout: 10_000 }).toBe(3);
    expect(isAlive(victim!)).toBe(false);
    await expect.poll(() => metricValue(gateway, /^quotagate_workers_listening (\d+)$/m)).toBe(2);
    // 9 of 10 spent: the new worker is held to the same counters.
    const after = await burst(gateway, 20);
    expect(count(after, 200)).toBe(1);
    expect(await metricValue(gateway, /^quotagate_worker_restarts_total (\d+)$/m)).toBe(1);
  }, 60_000);

  it('restarts a worker that keeps failing after growing delays, never in a tight loop; one that loaded another config refuses to serve', async () => {
    const gateway = await startGateway({ workers: 2 });
    const file = path.join(gateway.dir, 'default.js');
    const original = readFileSync(file, 'utf8');
    // conf/ changes under the running gateway: a new worker would serve another config than the primary.
    appendFileSync(file, 'module.exports.proxyTimeout = 12345;\n');
    process.kill(gateway.workerPids()[0]!, 'SIGKILL');
    const restarts = () => gateway.logs().filter((line) => line.msg === 'worker exited; starting another');
    await expect.poll(() => restarts().length, { timeout: 15_000, interval: 50 }).toBeGreaterThanOrEqual(4);
    expect(
      restarts()
        .slice(0, 4)
        .map((line) => line.restartInMs),
    ).toEqual([100, 200, 400, 800]);
    expect(gateway.cli.stderr()).toContain('this worker loaded another config than the primary runs');
    // The other worker serves alone meanwhile, and readiness says the gateway is short of one.
    expect(await get(gateway, '/pets/1')).toBe(200);
    expect((await fetch(`${gateway.admin}/readyz`)).status).toBe(503);
    writeFileSync(file, original);
    await expect.poll(() => gateway.workerPids().length, { timeout: 15_000, interval: 50 }).toBe(3);
    await expect.poll(() => metricValue(gateway, /^quotagate_workers_listening (\d+)$/m)).toBe(2);
    expect((await fetch(`${gateway.admin}/readyz`)).status).toBe(200);
  }, 60_000);

  it('SIGTERM: readiness says draining, requests in flight finish, every worker stops, and the primary exits 0', async () => {
    const gateway = await startGateway({ workers: 2 });
    const ready = await fetch(`${gateway.admin}/readyz`);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { workers: 'ok' } });
    const pids = gateway.workerPids();
    const seen = upstream.requests.length;
    const slow = get(gateway, '/pets/slow');
    await expect.poll(() => upstream.requests.length).toBe(seen + 1);
    gateway.cli.child.kill('SIGTERM');
    await gateway.cli.waitFor('"msg":"worker draining"');
    const draining = await fetch(`${gateway.admin}/readyz`);
    expect(draining.status).toBe(503);
    expect(await draining.json()).toMatchObject({ status: 'draining' });
    expect(await slow).toBe(200);
    const result = await gateway.cli.exited;
    expect(result.code).toBe(0);
    const messages = gateway.logs().map((line) => line.msg);
    expect(messages.filter((msg) => msg === 'worker stopped')).toHaveLength(2);
    expect(messages).toContain('gateway stopped');
    expect(messages).not.toContain('worker exited; starting another');
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
    expect(processesOf(gateway.dir)).toEqual([]);
  }, 60_000);

  it('with the Redis store: each worker is a gateway of the fleet, and the limit holds for all of them', async () => {
    const gateway = await startRedisWorkers(50);
    const before = upstream.requests.length;
    const statuses = await burst(gateway, 200);
    expect(count(statuses, 200)).toBe(50);
    expect(upstream.requests.length - before).toBe(50);
    // The console's sparkline: each worker hands its rejections to the fleet's lines when asked.
    expect((await systemUsage(gateway)).rejected).toBe(150);
  }, 60_000);

  it('keeps the fleet within the limit when a worker dies holding leases: what it held is spent, never handed out twice', async () => {
    const gateway = await startRedisWorkers(1_000);
    const before = upstream.requests.length;
    expect(count(await burst(gateway, 400), 200)).toBe(400);
    // Leases at work: far fewer trips to Redis than requests admitted.
    expect(await metricValue(gateway, /^quotagate_counter_store_trips_total (\d+)$/m)).toBeLessThan(200);
    const [victim] = gateway.workerPids();
    process.kill(victim!, 'SIGKILL');
    await gateway.cli.waitFor('"msg":"worker exited; starting another"');
    await expect
      .poll(() => metricValue(gateway, /^quotagate_workers_listening (\d+)$/m), { timeout: 10_000 })
      .toBe(2);
    const after = await burst(gateway, 1_000);
    const admitted = upstream.requests.length - before;
    expect(admitted).toBe(400 + count(after, 200));
    expect(admitted).toBeLessThanOrEqual(1_000);
    expect(count(after, 429)).toBeGreaterThan(0);
  }, 60_000);

  it('fails the start when a worker cannot listen (port in use): exit 1, and no worker left behind', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const dir = writeSeedConfigDir(
      petsConfig(upstream.url, {
        workers: 2,
        host: '127.0.0.1',
        port: (taken.address() as AddressInfo).port,
      }),
    );
    const cli = spawnCli(['start', '--config-dir', dir]);
    started.push({ cli, dir, gateway: () => null });
    try {
      const result = await cli.exited;
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('EADDRINUSE');
      expect(result.stderr).toMatch(/worker \d+ exited \(code 1\) before it listened/);
      expect(processesOf(dir)).toEqual([]);
    } finally {
      taken.close();
    }
  }, 60_000);
});

describe('workers: 1', () => {
  it('runs the gateway in one process, without node:cluster, as before', async () => {
    const gateway = await startGateway({ workers: 1 });
    expect(await get(gateway, '/pets/1')).toBe(200);
    const line = gateway.logs().find((each) => each.msg === 'gateway started')!;
    expect(line.workers).toBeUndefined();
    expect(gateway.workerPids()).toEqual([]);
    await expect.poll(() => gateway.logs().filter((each) => each.component === 'access').length).toBe(1);
    expect(gateway.logs().some((each) => 'worker' in each)).toBe(false);
    expect(await (await fetch(`${gateway.admin}/readyz`)).json()).toEqual({ status: 'ready', checks: {} });
  }, 60_000);
});
