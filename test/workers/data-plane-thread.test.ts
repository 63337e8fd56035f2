import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/free-port.js';
import {
  burst,
  count,
  metricValue,
  processesOf,
  setSystemQuota,
  systemUsage,
  useWorkerGateways,
} from '../helpers/worker-gateways.js';

/**
 * `workers: 1` as `gateway start` runs it: the admin listener in the main thread, the data plane in a
 * worker thread of the same process holding the memory store's counters. What crosses between them
 * (quota definitions, usage, metrics, rejections) is checked through the real CLI and real sockets.
 */
const { startGateway } = useWorkerGateways();

/** CPU seconds the process `pid` has used, all its threads together (/proc/<pid>/stat, utime + stime). */
function processCpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // Fields 14 and 15 of stat(5), counted from the state (field 3) at index 0.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

describe('the data-plane thread of workers: 1', () => {
  it('holds a quota changed through the admin API at once, counts it exactly, and the admin port reads its counts', async () => {
    const gateway = await startGateway({ workers: 1 });
    for (const limit of [3, 5]) {
      // The new definitions reach the thread before the API answers the change: the burst that follows
      // the answer is held to the new limit, none of it to the old one.
      await setSystemQuota(gateway, limit);
      const statuses = await burst(gateway, 8);
      expect(count(statuses, 200)).toBe(limit === 3 ? 3 : 2);
      expect(count(statuses, 429)).toBe(limit === 3 ? 5 : 6);
    }
    const usage = await systemUsage(gateway);
    expect(usage.used).toBe(5);
    expect(usage.rejected).toBe(11);
  }, 60_000);

  it("reports the process's CPU once, the thread's requests, and the Node.js figures of both threads added up", async () => {
    const gateway = await startGateway({ workers: 1 });
    const pid = gateway.cli.child.pid!;
    const cpu = /^quotagate_process_cpu_seconds_total ([\d.e+-]+)$/m;
    const reportedBefore = await metricValue(gateway, cpu);
    const usedBefore = processCpuSeconds(pid);
    for (let i = 0; i < 5; i += 1) expect(count(await burst(gateway, 200), 200)).toBe(200);
    const usedAfter = processCpuSeconds(pid);
    const reportedAfter = await metricValue(gateway, cpu);
    // Both threads read the whole process's CPU: added up, the figure would grow twice as fast as the
    // process's. The scrapes themselves take a little more than the span /proc was read over.
    expect(usedAfter - usedBefore).toBeGreaterThan(0.2);
    expect(reportedAfter - reportedBefore).toBeLessThan((usedAfter - usedBefore) * 1.5);
    const text = await (await fetch(`${gateway.admin}/metrics`)).text();
    expect(text.match(/^quotagate_process_cpu_seconds_total /gm)).toHaveLength(1);
    expect(await metricValue(gateway, /^quotagate_requests_total\{[^}]*status="200"\} (\d+)$/m)).toBe(1000);
    // Each thread is an isolate with its heap and handles: the figures are of both, the listening
    // servers those of the admin listener (this thread) and of the data plane (the thread).
    expect(await metricValue(gateway, /^quotagate_nodejs_active_handles\{type="Server"\} (\d+)$/m)).toBe(2);
    const heapUsed = await metricValue(gateway, /^quotagate_nodejs_heap_size_used_bytes (\d+)$/m);
    expect(heapUsed).toBeGreaterThan(0);
    expect(heapUsed).toBeLessThanOrEqual(
      await metricValue(gateway, /^quotagate_nodejs_heap_size_total_bytes (\d+)$/m),
    );
    // The event loop's delay is the thread's: the admin listener's loop is not sampled.
    expect(text.match(/^quotagate_nodejs_eventloop_lag_p99_seconds /gm)).toHaveLength(1);
    expect(
      await metricValue(gateway, /^quotagate_nodejs_eventloop_lag_p99_seconds ([\d.e+-]+)$/m),
    ).toBeGreaterThan(0);
  }, 60_000);

  it('replaces a data-plane thread that an uncaught exception ended, in the same process, and logs the exception', async () => {
    // A port of its own: the thread that replaces the first listens on the same one (with port 0 it
    // would get another ephemeral port).
    const gateway = await startGateway({
      port: await freePort(),
      workers: 1,
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: path.resolve('test/fixtures/plugins/crashing-plugin.js'),
    });
    const status = () =>
      fetch(`${gateway.url}/pets/1`).then(
        (res) => res.status,
        () => 0,
      );
    expect(await status()).toBe(200);
    await fetch(`${gateway.url}/pets/1`, { headers: { 'x-crash': '1' } }).catch(() => undefined);
    await gateway.cli.waitFor('"msg":"worker exited; starting another"');
    const failed = gateway.logs().find((line) => line.msg === 'the data-plane thread failed');
    expect((failed?.err as { message?: string } | undefined)?.message).toBe(
      'a plugin bug, thrown where nothing catches it',
    );
    await expect.poll(status, { timeout: 10_000 }).toBe(200);
    expect(await metricValue(gateway, /^quotagate_worker_restarts_total (\d+)$/m)).toBe(1);
    expect(processesOf(gateway.dir)).toEqual([gateway.cli.child.pid]);
  }, 60_000);
});
