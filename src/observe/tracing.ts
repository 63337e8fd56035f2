import type { IncomingHttpHeaders } from 'node:http';
import type { Attributes, Context, Span } from '@opentelemetry/api';

// Types only: this module is what the gateway imports, and it must load nothing of OpenTelemetry. The
// SDK is in `otel-tracing.ts`, which runtime/ imports dynamically, only when tracing is on.

/**
 * The trace of one exchange: its server span, the seam every later span of the exchange hangs on.
 * A child span (authentication, the quota check, the upstream exchange) is started with `child` and
 * ended by whoever started it; it shows in the trace only when the server span is recording.
 */
export interface ExchangeTrace {
  /** The server span (a non-recording one when the exchange was sampled out). */
  readonly span: Span;
  /** The context whose active span is the server span: the parent of the exchange's child spans. */
  readonly context: Context;
  /** Its trace id (32 hex digits), sampled or not: the access line's `traceId`. */
  readonly traceId: string;
  /** Whether the server span records: when false, skip building attributes. */
  readonly recording: boolean;
  /**
   * Starts a span under the server span (or under `parent`, a child span), `internal` unless said:
   * `client` for an exchange with another service (the upstream, an LDAP bind, a JWKS fetch).
   */
  child(name: string, kind?: 'internal' | 'client', attributes?: Attributes, parent?: Span): Span;
  /**
   * Writes the `traceparent` (and `tracestate`) the upstream is to receive into `fields` (name, value
   * pairs), in place of any the client sent, naming `parent` (the server span unless given) as the
   * upstream's parent. A sampled-out exchange that came with a valid context leaves the client's fields
   * as they are.
   */
  propagate(fields: Array<string | string[]>, parent?: Span): void;
  /** Marks the server span failed (a 5xx: semantic conventions leave a 4xx of a server span unset). */
  fail(description: string): void;
}

/** Where each exchange's trace starts: the SDK's tracer, when tracing is on. */
export interface Tracing {
  /** Starts the server span of an exchange, continuing the client's `traceparent` when it is valid. */
  start(headers: IncomingHttpHeaders, verb: string): ExchangeTrace;
  /** Exports what is waiting, within `timeoutMs`; spans that do not make it are dropped and counted. */
  close(timeoutMs: number): Promise<void>;
}

/** How the exporter and sampler are set, resolved from the config and the `OTEL_*` variables. */
export interface TracingSettings {
  /** The OTLP/HTTP (protobuf) traces URL. */
  endpoint: string;
  headers: Readonly<Record<string, string>>;
  /** The resource's attributes, `service.name` among them. */
  resource: Readonly<Record<string, string>>;
  sampler:
    | 'always_on'
    | 'always_off'
    | 'traceidratio'
    | 'parentbased_always_on'
    | 'parentbased_always_off'
    | 'parentbased_traceidratio';
  ratio: number;
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMs: number;
  exportTimeoutMs: number;
}

/** Why a span was dropped: its queue was full, or the export it was in failed or timed out. */
export type SpanDropReason = 'queue_full' | 'export_failed';
