import { expect } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';
import { accessLines, startTestGateway, type StartClocks, type TestGateway } from './test-gateway.js';

/** A gateway tracing every exchange to a receiver of its own; `close` (once) exports what waits. */
export interface TracedGateway {
  gateway: TestGateway;
  receiver: OtlpReceiver;
  close(): Promise<void>;
}

/** An exchange's one access line and the one server span that names its request id. */
export interface EndedExchange {
  line: Record<string, unknown>;
  span: ReceivedSpan;
}

/**
 * Starts a gateway on `config` with tracing on (every exchange sampled, exported every 10 ms) to a
 * receiver of its own; `defer` closes both.
 */
export async function startTracedGateway(
  config: Record<string, unknown>,
  defer: (cleanup: () => Promise<void> | void) => void,
  clocks: StartClocks = {},
): Promise<TracedGateway> {
  const receiver = await startOtlpReceiver();
  defer(() => receiver.close());
  const gateway = await startTestGateway(
    { ...config, tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 } },
    {},
    clocks,
  );
  let closing: Promise<void> | null = null;
  const close = () => (closing ??= gateway.close());
  defer(close);
  return { gateway, receiver, close };
}

const linesOf = (gateway: TestGateway, requestId: string) =>
  accessLines(gateway).filter((line) => line.requestId === requestId);

/**
 * Waits for the access line of each of `requestIds`, closes the gateway (which exports every span
 * ended), then asserts that each exchange has exactly one access line and exactly one server span, of
 * the same trace; answers them by request id.
 */
export async function endedOnce(
  traced: TracedGateway,
  requestIds: readonly string[],
): Promise<Map<string, EndedExchange>> {
  const { gateway, receiver } = traced;
  await expect.poll(() => requestIds.filter((id) => linesOf(gateway, id).length > 0)).toEqual(requestIds);
  await traced.close();
  const ended = new Map<string, EndedExchange>();
  for (const id of requestIds) {
    const lines = linesOf(gateway, id);
    const spans = receiver.spans.filter((span) => span.attributes['quotagate.request_id'] === id);
    expect(lines, id).toHaveLength(1);
    expect(spans, id).toHaveLength(1);
    const [line, span] = [lines[0]!, spans[0]!];
    expect(span.kind).toBe(2);
    expect(span.traceId).toBe(line.traceId);
    // The span says what the access line says.
    expect(span.attributes).toMatchObject({
      'http.response.status_code': line.status,
      'http.request.body.size': line.bytesIn,
      'http.response.body.size': line.bytesOut,
    });
    expect(span.attributes['quotagate.upstream.outcome']).toBe(line.outcome ?? undefined);
    expect(span.attributes['quotagate.ended_by']).toBe(line.endedBy);
    expect(span.attributes['quotagate.websocket']).toBe(line.webSocket);
    ended.set(id, { line, span });
  }
  return ended;
}
