import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { ApiConfig } from '../../src/config/schema.js';
import { createLogger } from '../../src/observe/log.js';
import { HealthChecks } from '../../src/upstream/health-checks.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { startHealthUpstream } from '../helpers/grpc-health.js';
import { startUpstream } from '../helpers/upstream.js';

const defer = cleanupAfterEach();
const logger = createLogger({ level: 'silent' });
const healthCheck = { path: '/healthz', interval: 1_000, timeout: 500, unhealthyAfter: 2, healthyAfter: 2 };

const apiOf = (targets: string[], id = 'pets'): ApiConfig =>
  ({
    id,
    protocol: 'http',
    upstream: { targets, balance: 'round-robin', healthCheck },
  }) as unknown as ApiConfig;

function checksOn(timers: FakeTimers): HealthChecks {
  const checks = new HealthChecks(timers, logger);
  defer(() => checks.close());
  return checks;
}

describe('the health checks of the targets', () => {
  it('count a check with no answer within its timeout as failed (a hung target)', async () => {
    const held: ServerResponse[] = [];
    const hung = await startUpstream((_req, res) => held.push(res));
    defer(() => hung.close());
    const timers = new FakeTimers();
    const checks = checksOn(timers);
    checks.watch([apiOf([hung.url])]);
    const health = checks.stateOf('pets', hung.url);
    while (held.length === 0) await new Promise((resolve) => setImmediate(resolve));
    timers.advance(healthCheck.timeout);
    await checks.idle();
    expect(health).toMatchObject({ healthy: true, failures: 1 });
    timers.advance(healthCheck.interval - healthCheck.timeout);
    while (held.length === 1) await new Promise((resolve) => setImmediate(resolve));
    timers.advance(healthCheck.timeout);
    await checks.idle();
    expect(health).toMatchObject({ healthy: false, failures: 2 });
  });

  it('count a refused connection and an answer not 2xx as failed', async () => {
    const failing = await startUpstream((_req, res) => res.writeHead(503).end());
    defer(() => failing.close());
    const gone = await startUpstream();
    await gone.close();
    const timers = new FakeTimers();
    const checks = checksOn(timers);
    checks.watch([apiOf([failing.url, gone.url])]);
    await checks.idle();
    timers.advance(healthCheck.interval);
    await checks.idle();
    expect(checks.stateOf('pets', failing.url)).toMatchObject({ healthy: false, failures: 2 });
    expect(checks.stateOf('pets', gone.url)).toMatchObject({ healthy: false, failures: 2 });
  });

  it("count a gRPC target's SERVING as passed, and its check with no answer within its timeout as failed", async () => {
    const [serving, hung] = [await startHealthUpstream(), await startHealthUpstream()];
    defer(() => serving.close());
    defer(() => hung.close());
    hung.statuses.set('', 'silent');
    const [servingUrl, hungUrl] = [`http://${serving.address}`, `http://${hung.address}`];
    const timers = new FakeTimers();
    const checks = checksOn(timers);
    const { interval, timeout, unhealthyAfter, healthyAfter } = healthCheck;
    const grpcHealthCheck = { service: '', interval, timeout, unhealthyAfter, healthyAfter };
    checks.watch([
      {
        id: 'greeter',
        protocol: 'grpc',
        upstream: { targets: [servingUrl, hungUrl], balance: 'round-robin', healthCheck: grpcHealthCheck },
      } as unknown as ApiConfig,
    ]);
    while (checks.stateOf('greeter', servingUrl).successes === 0 || hung.checked.length === 0)
      await new Promise((resolve) => setImmediate(resolve));
    timers.advance(healthCheck.timeout);
    await checks.idle();
    expect(checks.stateOf('greeter', hungUrl)).toMatchObject({ healthy: true, failures: 1 });
    expect(checks.stateOf('greeter', servingUrl)).toMatchObject({ healthy: true, failures: 0, successes: 1 });
  });

  it('stop checking a target a reload drops, and stop every timer on close', async () => {
    const [a, b] = [await startUpstream(), await startUpstream()];
    defer(() => a.close());
    defer(() => b.close());
    const timers = new FakeTimers();
    const checks = new HealthChecks(timers, logger);
    checks.watch([apiOf([a.url, b.url])]);
    await checks.idle();
    expect(timers.waiting()).toEqual([1_000, 1_000]);
    checks.watch([apiOf([a.url])]);
    expect(timers.waiting()).toEqual([1_000]);
    timers.advance(healthCheck.interval);
    await checks.idle();
    expect(b.requests).toHaveLength(1);
    expect(a.requests).toHaveLength(2);
    await checks.close();
    expect(timers.waiting()).toEqual([]);
  });
});
