import type { OtlpReceiver, ReceivedSpan } from './otlp-receiver.js';
import { accessLines, type TestGateway } from './test-gateway.js';

/** OTLP's SpanKind numbers. */
export const spanKind = { internal: 1, server: 2, client: 3 } as const;

/** The spans of one exchange's trace: its server span, and every span of the same trace id. */
export interface ExchangeSpans {
  server: ReceivedSpan;
  spans: ReceivedSpan[];
  /** The spans whose parent is `span`, by name. */
  childrenOf(span: ReceivedSpan): ReceivedSpan[];
  /** The one span of this name (throws when there are none or several). */
  one(name: string): ReceivedSpan;
}

/**
 * The trace of the last exchange `gateway` logged with `status`, once its server span was exported (it
 * ends last, where the access line is written, so the spans it ended after came in that export or
 * before). Its server span is the one whose `quotagate.request_id` is the access line's.
 */
export async function traceOf(
  gateway: TestGateway,
  receiver: OtlpReceiver,
  status: number,
): Promise<ExchangeSpans> {
  const line = accessLines(gateway).findLast((entry) => entry.status === status);
  if (!line) throw new Error(`no access line of status ${status}`);
  const requestId = line.requestId as string;
  let server: ReceivedSpan | undefined;
  for (;;) {
    server = receiver.spans.find((span) => span.attributes['quotagate.request_id'] === requestId);
    if (server) break;
    await receiver.waitForSpans(receiver.spans.length + 1);
  }
  const spans = receiver.spans.filter((span) => span.traceId === server.traceId);
  const byName = (list: ReceivedSpan[]) => [...list].sort((a, b) => a.name.localeCompare(b.name));
  return {
    server,
    spans,
    childrenOf: (parent) => byName(spans.filter((span) => span.parentSpanId === parent.spanId)),
    one(name) {
      const named = spans.filter((span) => span.name === name);
      if (named.length !== 1) throw new Error(`${named.length} spans named ${name} in the trace`);
      return named[0]!;
    },
  };
}

/**
 * Every text the spans received carry where a secret could leak: names, attribute values, event names
 * and attributes, status messages, and the resource.
 */
export function spanTexts(spans: readonly ReceivedSpan[]): string[] {
  return spans.flatMap((span) => [
    span.name,
    span.status.message,
    ...Object.entries(span.attributes).flatMap(([key, value]) => [key, String(value)]),
    ...span.events.flatMap((event) => [
      event.name,
      ...Object.entries(event.attributes).flatMap(([key, value]) => [key, String(value)]),
    ]),
    ...Object.values(span.resource).map(String),
  ]);
}

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
