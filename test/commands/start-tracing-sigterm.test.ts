import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startCliGateway } from '../helpers/cli-gateway.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { request } from '../helpers/raw-http.js';
import { basicAuth, devKey, petsConfig } from '../helpers/test-gateway.js';
import { startHoldingUpstream } from '../helpers/holding-upstream.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * Issue 46: SIGTERM to `gateway start` with tracing on exports the spans of the requests it answered
 * before it exits, though their batch was not due for ten minutes; and a collector that never answers
 * keeps it no longer than `shutdownTimeout`, nor has a worker killed when a request ran through the grace
 * period. With `workers: 1` (a thread) and `workers: 2` (processes).
 */
const defer = cleanupAfterEach();

/** A minute: longer than the test may run, so that only `shutdownTimeout` can bound an export. */
const longerThanTheTest = 60_000;

async function tracedCli(
  workers: number,
  answer: 200 | 'hang',
  upstream: TestUpstream,
  shutdownTimeout = 1_000,
) {
  const receiver = await startOtlpReceiver();
  receiver.answer = answer;
  defer(() => receiver.close());
  const gateway = await startCliGateway(
    petsConfig(`${upstream.url}/pets`, {
      workers,
      shutdownTimeout,
      accessLog: { flushMs: 0 },
      tracing: {
        enabled: true,
        endpoint: receiver.url,
        scheduledDelay: 600_000,
        exportTimeout: longerThanTheTest,
      },
    }),
    defer,
  );
  // Nothing is exported before its batch is due.
  expect(receiver.requests).toEqual([]);
  return { gateway, receiver };
}

async function answeredFour(workers: number, answer: 200 | 'hang') {
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const { gateway, receiver } = await tracedCli(workers, answer, upstream);
  // Each on a connection of its own, so that both workers of two answer some.
  for (let i = 0; i < 4; i += 1) {
    const answered = await request(gateway.url, { path: `/pets/${i}`, headers: withKey(`sigterm-${i}`) });
    expect(answered.status).toBe(200);
  }
  await gateway.until(() => gateway.accessLines().length === 4);
  return { gateway, receiver };
}

const withKey = (requestId: string) => ({ authorization: basicAuth(devKey), 'x-request-id': requestId });

// workers: 1 (the data-plane thread) exports on SIGTERM too: test/runtime/tracing-processes.test.ts.
describe('SIGTERM to gateway start with tracing on, workers: 2', () => {
  it("exports the spans of every request either worker answered before it exits, each its line's trace", async () => {
    const { gateway, receiver } = await answeredFour(2, 200);
    gateway.cli.child.kill('SIGTERM');
    const result = await gateway.cli.exited;
    // Taken by the receiver by the time the process was gone: each request's one span, of its line's trace.
    const spans = [...receiver.spans];
    expect(result.code).toBe(0);
    const lines = gateway.accessLines();
    expect(spans.map((span) => span.attributes['quotagate.request_id']).sort()).toEqual(
      lines.map((line) => line.requestId).sort(),
    );
    for (const line of lines)
      expect(spans.find((span) => span.attributes['quotagate.request_id'] === line.requestId)!.traceId).toBe(
        line.traceId,
      );
  }, 30_000);
});

describe.each([1, 2])('SIGTERM to gateway start with tracing on, workers: %i', (workers) => {
  it('exits within shutdownTimeout when the collector never answers, its spans dropped', async () => {
    const { gateway, receiver } = await answeredFour(workers, 'hang');
    gateway.cli.child.kill('SIGTERM');
    // The export hangs for longer than the test may run: only shutdownTimeout lets the process exit.
    const result = await gateway.cli.exited;
    expect(result.code).toBe(0);
    expect(receiver.requests.reduce((sum, sent) => sum + sent.spans, 0)).toBe(4);
    expect(receiver.spans).toEqual([]);
  }, 20_000);

  it('exits 0 when a request runs through the grace period and the collector never answers', async () => {
    const upstream = await startHoldingUpstream();
    defer(() => upstream.close());
    // Longer than what a worker of two is given beyond shutdownTimeout to close (5 s).
    const shutdownTimeout = 6_000;
    const { gateway, receiver } = await tracedCli(workers, 'hang', upstream, shutdownTimeout);
    const held = request(gateway.url, { path: '/pets/held', headers: withKey('held') }).catch(() => null);
    await expect.poll(() => upstream.held()).toBe(1);
    gateway.cli.child.kill('SIGTERM');
    // The drain and the export share shutdownTimeout: no worker is killed for a collector that hangs.
    const result = await gateway.cli.exited;
    await held;
    // The one data plane that held it waited out its grace period.
    expect(
      gateway.logs().filter((line) => line.msg === 'grace period over, closing open requests'),
    ).toHaveLength(1);
    expect(result.code).toBe(0);
    expect(gateway.accessLines().map((line) => [line.requestId, line.status])).toEqual([['held', 499]]);
    expect(receiver.requests.reduce((sum, sent) => sum + sent.spans, 0)).toBe(1);
  }, 40_000);
});
