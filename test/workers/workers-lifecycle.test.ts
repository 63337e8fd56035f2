import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import net, { type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startHoldingUpstream } from '../helpers/holding-upstream.js';
import { spawnCli } from '../helpers/run-cli.js';
import { petsConfig, writeSeedConfigDir } from '../helpers/test-gateway.js';
import {
  burst,
  count,
  get,
  isAlive,
  metricValue,
  processesOf,
  setSystemQuota,
  useWorkerGateways,
} from '../helpers/worker-gateways.js';

const { startGateway, stopAfterTest, upstream } = useWorkerGateways();
const defer = cleanupAfterEach();

describe('workers: 2', () => {
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
    const held = await startHoldingUpstream();
    defer(() => held.close());
    const gateway = await startGateway({ workers: 2, apis: petsConfig(held.url).apis });
    const ready = await fetch(`${gateway.admin}/readyz`);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { workers: 'ok', upstreams: 'ok' } });
    const pids = gateway.workerPids();
    // In flight until readiness has been read during the drain: the upstream answers only then.
    const inFlight = get(gateway, '/pets/1');
    await expect.poll(() => held.held()).toBe(1);
    gateway.cli.child.kill('SIGTERM');
    await gateway.cli.waitFor('"msg":"worker draining"');
    const draining = await fetch(`${gateway.admin}/readyz`);
    expect(draining.status).toBe(503);
    expect(await draining.json()).toMatchObject({ status: 'draining' });
    held.answerAll();
    expect(await inFlight).toBe(200);
    const result = await gateway.cli.exited;
    expect(result.code).toBe(0);
    const messages = gateway.logs().map((line) => line.msg);
    expect(messages.filter((msg) => msg === 'worker stopped')).toHaveLength(2);
    expect(messages).toContain('gateway stopped');
    expect(messages).not.toContain('worker exited; starting another');
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
    expect(processesOf(gateway.dir)).toEqual([]);
  }, 60_000);

  it('fails the start when a worker cannot listen (port in use): exit 1, and no worker left behind', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const dir = writeSeedConfigDir(
      petsConfig(upstream().url, {
        workers: 2,
        host: '127.0.0.1',
        port: (taken.address() as AddressInfo).port,
      }),
    );
    const cli = spawnCli(['start', '--config-dir', dir]);
    stopAfterTest(cli, dir);
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
  it('runs one process: the admin listener in its main thread, the data plane in a thread of its own', async () => {
    const gateway = await startGateway({ workers: 1 });
    expect(await get(gateway, '/pets/1')).toBe(200);
    const line = gateway.logs().find((each) => each.msg === 'gateway started')!;
    expect(line.workers).toBe(1);
    // No node:cluster worker: the one data plane said it started from the CLI's own process.
    expect(gateway.workerPids()).toEqual([gateway.cli.child.pid]);
    expect(processesOf(gateway.dir)).toEqual([gateway.cli.child.pid]);
    await expect.poll(() => gateway.logs().filter((each) => each.component === 'access').length).toBe(1);
    const access = gateway.logs().find((each) => each.component === 'access')!;
    expect(access.pid).toBe(gateway.cli.child.pid);
    expect(await (await fetch(`${gateway.admin}/readyz`)).json()).toEqual({
      status: 'ready',
      checks: { workers: 'ok', upstreams: 'ok' },
    });
  }, 60_000);
});
