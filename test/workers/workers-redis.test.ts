import { describe, expect, it } from 'vitest';
import { burst, count, metricValue, systemUsage, useWorkerGateways } from '../helpers/worker-gateways.js';

const { startRedisWorkers, upstream } = useWorkerGateways();

describe('workers: 2', () => {
  it('with the Redis store: each worker is a gateway of the fleet, and the limit holds for all of them', async () => {
    const gateway = await startRedisWorkers(50);
    const before = upstream().requests.length;
    const statuses = await burst(gateway, 200);
    expect(count(statuses, 200)).toBe(50);
    expect(upstream().requests.length - before).toBe(50);
    // The console's sparkline: each worker hands its rejections to the fleet's lines when asked.
    expect((await systemUsage(gateway)).rejected).toBe(150);
  }, 60_000);

  it('keeps the fleet within the limit when a worker dies holding leases: what it held is spent, never handed out twice', async () => {
    const gateway = await startRedisWorkers(1_000);
    const before = upstream().requests.length;
    expect(count(await burst(gateway, 400), 200)).toBe(400);
    // Leases at work: far fewer trips to Redis than requests admitted.
    expect(await metricValue(gateway, /^quotagate_store_trips_total (\d+)$/m)).toBeLessThan(200);
    const [victim] = gateway.workerPids();
    process.kill(victim!, 'SIGKILL');
    await gateway.cli.waitFor('"msg":"worker exited; starting another"');
    await expect
      .poll(() => metricValue(gateway, /^quotagate_workers_listening (\d+)$/m), { timeout: 10_000 })
      .toBe(2);
    const after = await burst(gateway, 1_000);
    const admitted = upstream().requests.length - before;
    expect(admitted).toBe(400 + count(after, 200));
    expect(admitted).toBeLessThanOrEqual(1_000);
    expect(count(after, 429)).toBeGreaterThan(0);
  }, 60_000);
});
