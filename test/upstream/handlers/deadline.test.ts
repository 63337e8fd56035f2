import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import { grpcHead, startShapedGrpcUpstream } from '../../helpers/shaped-grpc-upstream.js';
import { originOf, startFront, testHost } from '../../helpers/upstream-exchanges.js';

/** The deadline handler: a gRPC call's `grpc-timeout`, measured from its arrival on the injected clock. */
const defer = cleanupAfterEach();

/** A gRPC upstream that never answers, a front whose exchanges have a deadline of `deadlineMs`, and its clock. */
async function silentCall(deadlineMs: number | null) {
  const upstream = await startShapedGrpcUpstream(() => undefined, defer);
  const clock = new FakeClock();
  const host = testHost(clock);
  const front = await startFront(
    originOf(upstream.url, true, clock),
    host,
    (exchange) => {
      exchange.grpc = true;
      exchange.deadlineMs = deadlineMs;
    },
    clock,
  );
  defer(() => front.close());
  const answer = request(front.url, { method: 'POST', body: 'call' });
  // A call left unanswered is cut as the test ends.
  answer.catch(() => undefined);
  while (upstream.opened() === 0) await clock.advance(0);
  return { upstream, clock, host, front, answer };
}

describe('the deadline', () => {
  it('ends the upstream exchange once the call has taken its grpc-timeout, and the pipeline is told a timeout', async () => {
    const { upstream, clock, host, answer } = await silentCall(100);
    await clock.advance(99);
    expect(host.failures).toEqual([]);
    await clock.advance(1);
    expect(host.failures.map(({ error }) => (error as NodeJS.ErrnoException).code)).toEqual([
      'GRPC_DEADLINE_EXCEEDED',
    ]);
    expect((await answer).statusCode).toBe(504);
    await upstream.closedStreams(1);
    expect(upstream.closed()).toBe(1);
  });

  it('leaves a call without a deadline to the upstream', async () => {
    const { clock, host, front } = await silentCall(null);
    await clock.advance(60_000);
    expect(host.failures).toEqual([]);
    expect(front.exchanges[0]!.deadline).toBeNull();
  });

  it('stops once the answer has ended in time', async () => {
    const upstream = await startShapedGrpcUpstream(
      (stream) => stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true }),
      defer,
    );
    const clock = new FakeClock();
    const host = testHost(clock);
    // The connections' idle timers run on the system's clock: the test's holds the deadline alone.
    const front = await startFront(
      originOf(upstream.url, true),
      host,
      (exchange) => {
        exchange.grpc = true;
        exchange.deadlineMs = 100;
      },
      clock,
    );
    defer(() => front.close());
    const answer = await request(front.url, { method: 'POST', body: 'call' });
    await answer.body.text();
    expect(clock.pending).toBe(0);
    await clock.advance(1_000);
    expect(host.failures).toEqual([]);
  });
});
