import type { OtlpReceiver, ReceivedSpan } from './otlp-receiver.js';

// Reading a trace as a tree from what an OTLP receiver took: the server span of an exchange, and the
// spans under it (the quota check, the upstream client spans), by their parent ids.

/** OTLP's SpanKind of a server and of a client span. */
export const spanKind = { internal: 1, server: 2, client: 3 } as const;

/** The spans of the trace `traceId` taken so far, in the order they came. */
export const spansOfTrace = (receiver: OtlpReceiver, traceId: string): ReceivedSpan[] =>
  receiver.spans.filter((span) => span.traceId === traceId);

/** The spans whose parent is `parent`, in the order they came. */
export const childrenOf = (spans: readonly ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] =>
  spans.filter((span) => span.traceId === parent.traceId && span.parentSpanId === parent.spanId);

/** The one span of `kind` among `spans` (a test fails when there are none, or more). */
export function onlyOf(spans: readonly ReceivedSpan[], kind: number): ReceivedSpan {
  const found = spans.filter((span) => span.kind === kind);
  if (found.length !== 1) throw new Error(`${found.length} spans of kind ${kind}, not one`);
  return found[0]!;
}

/** The `traceparent`'s parent id (its third part). */
export const parentOf = (traceparent: string | undefined): string | undefined => traceparent?.split('-')[2];
