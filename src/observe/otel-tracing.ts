import type { IncomingHttpHeaders } from 'node:http';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type TraceState,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
} from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  RandomIdGenerator,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type IdGenerator,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { Clock } from '../kit/clock.js';
import type { ExchangeTrace, SpanDropReason, Tracing, TracingSettings } from './tracing.js';

/**
 * The OpenTelemetry SDK behind `Tracing`: loaded by runtime/ with a dynamic import, only when tracing is
 * on. No global provider, propagator or context manager is registered: each exchange's context is
 * passed by hand (`ExchangeTrace.context`), which costs nothing on the requests that are not traced and
 * leaves the process's global OpenTelemetry API to whoever else uses it.
 */
export interface OtelTracingParts {
  settings: TracingSettings;
  /** Told of spans dropped: queue full, or their export failed (a dead, slow or refusing collector). */
  onDropped: (spans: number, reason: SpanDropReason) => void;
  /** Told when an export fails after one that did not (once per outage), and when exports work again. */
  onExportState: (failing: boolean, error: Error | undefined) => void;
  /** The timer of `close`'s bound. */
  timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
}

const propagator = new W3CTraceContextPropagator();

const headerGetter: TextMapGetter<IncomingHttpHeaders> = {
  get: (carrier, key) => carrier[key],
  keys: (carrier) => Object.keys(carrier),
};

const fieldSetter: TextMapSetter<Array<string | string[]>> = {
  set: (carrier, key, value) => void carrier.push(key, value),
};

export function startOtelTracing(parts: OtelTracingParts): Tracing {
  const { settings } = parts;
  const queue = { waiting: 0, failing: false };
  const exporter = new CountingExporter(
    new OTLPTraceExporter({
      url: settings.endpoint,
      headers: { ...settings.headers },
      timeoutMillis: settings.exportTimeoutMs,
    }),
    queue,
    parts,
  );
  const batch = new BatchSpanProcessor(exporter, {
    maxQueueSize: settings.maxQueueSize,
    maxExportBatchSize: Math.min(settings.maxExportBatchSize, settings.maxQueueSize),
    scheduledDelayMillis: settings.scheduledDelayMs,
    exportTimeoutMillis: settings.exportTimeoutMs,
  });
  const sampler = samplerOf(settings);
  const ids = new DrawnIds();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes(settings.resource),
    sampler,
    idGenerator: ids,
    spanProcessors: [new BoundedProcessor(batch, queue, settings.maxQueueSize, parts.onDropped)],
  });
  const tracer = provider.getTracer('quotagate');
  return {
    start(headers: IncomingHttpHeaders, verb: string): ExchangeTrace {
      const incoming =
        headers.traceparent === undefined
          ? ROOT_CONTEXT
          : propagator.extract(ROOT_CONTEXT, headers, headerGetter);
      const parent = trace.getSpanContext(incoming);
      const continued = parent !== undefined && trace.isSpanContextValid(parent);
      const traceId = continued ? parent.traceId : ids.random.generateTraceId();
      // The sampler decides first, on the trace id the span would take: a sampled-out exchange (most of
      // them, at a low ratio) then costs an id and this call, no span, context or propagator of the SDK.
      const sampled = sampler.shouldSample(incoming, traceId, verb, SpanKind.SERVER, {}, []);
      if (sampled.decision === SamplingDecision.NOT_RECORD)
        return new SampledOutTrace(
          tracer,
          ids,
          incoming,
          continued ? parent : null,
          traceId,
          sampled.traceState,
        );
      // The SDK draws a root span's trace id itself, and decides again on it: it takes the one decided on.
      if (!continued) ids.next = traceId;
      const span = tracer.startSpan(verb, { kind: SpanKind.SERVER }, incoming);
      ids.next = undefined;
      return new ServerTrace(tracer, span, trace.setSpan(incoming, span));
    },
    close: (timeoutMs) => closeWithin(provider, timeoutMs, parts.timers),
  };
}

/** Random ids, but for the trace id a root span is to take when the sampler has decided on it. */
class DrawnIds implements IdGenerator {
  readonly random = new RandomIdGenerator();
  next: string | undefined = undefined;

  generateTraceId(): string {
    const drawn = this.next ?? this.random.generateTraceId();
    this.next = undefined;
    return drawn;
  }

  generateSpanId(): string {
    return this.random.generateSpanId();
  }
}

/** The SDK's sampler that `OTEL_TRACES_SAMPLER` names. */
function samplerOf({ sampler, ratio }: TracingSettings): Sampler {
  const byRatio = () => new TraceIdRatioBasedSampler(ratio);
  switch (sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return byRatio();
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: byRatio() });
  }
}

class ServerTrace implements ExchangeTrace {
  readonly traceId: string;
  readonly recording: boolean;

  constructor(
    private readonly tracer: Tracer,
    readonly span: Span,
    readonly context: Context,
  ) {
    this.traceId = span.spanContext().traceId;
    this.recording = span.isRecording();
  }

  child(
    name: string,
    kind: 'internal' | 'client' = 'internal',
    attributes?: Attributes,
    parent?: Span,
  ): Span {
    const context = parent === undefined ? this.context : trace.setSpan(this.context, parent);
    return this.tracer.startSpan(
      name,
      {
        kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL,
        ...(attributes ? { attributes } : {}),
      },
      context,
    );
  }

  propagate(fields: Array<string | string[]>, parent: Span = this.span): void {
    // One of each, the gateway's: a client's own (or a second, or a malformed one) is replaced.
    removeFields(fields, 'traceparent', 'tracestate');
    propagator.inject(trace.setSpan(ROOT_CONTEXT, parent), fields, fieldSetter);
  }

  fail(description: string): void {
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: description });
  }
}

/**
 * The trace of an exchange the sampler left out: its trace id (for the access line) and, when the
 * upstream is to get one, a `traceparent` of its own, built from strings. Its non-recording span and
 * context are made only if something asks for them.
 */
class SampledOutTrace implements ExchangeTrace {
  readonly recording = false;
  private spanId: string | undefined = undefined;
  private nonRecording: Span | undefined = undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly ids: DrawnIds,
    private readonly incoming: Context,
    /** The client's valid context, which the upstream receives unchanged; null for a new trace. */
    private readonly parent: SpanContext | null,
    readonly traceId: string,
    private readonly traceState: TraceState | undefined,
  ) {}

  get span(): Span {
    this.nonRecording ??= trace.wrapSpanContext({
      traceId: this.traceId,
      spanId: this.ownSpanId(),
      traceFlags: TraceFlags.NONE,
      ...(this.traceState ? { traceState: this.traceState } : {}),
    });
    return this.nonRecording;
  }

  get context(): Context {
    return trace.setSpan(this.incoming, this.span);
  }

  child(name: string, kind: 'internal' | 'client' = 'internal'): Span {
    return this.tracer.startSpan(
      name,
      { kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL },
      this.context,
    );
  }

  propagate(fields: Array<string | string[]>): void {
    if (this.parent !== null) return;
    removeFields(fields, 'traceparent', 'tracestate');
    fields.push('traceparent', `00-${this.traceId}-${this.ownSpanId()}-00`);
    const state = this.traceState?.serialize();
    if (state) fields.push('tracestate', state);
  }

  fail(): void {}

  private ownSpanId(): string {
    this.spanId ??= this.ids.generateSpanId();
    return this.spanId;
  }
}

/** Removes every `first` and `second` field of a name, value list (lower-case names). */
function removeFields(fields: Array<string | string[]>, first: string, second: string): void {
  let kept = 0;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i];
    if (name === first || name === second) continue;
    fields[kept] = name!;
    fields[kept + 1] = fields[i + 1]!;
    kept += 2;
  }
  fields.length = kept;
}

/**
 * The batch processor behind a bound of its own: a span past `maxQueueSize` waiting is dropped and
 * counted here (the SDK's processor would drop it too, but only log it). Only sampled spans reach it.
 */
class BoundedProcessor implements SpanProcessor {
  constructor(
    private readonly batch: BatchSpanProcessor,
    private readonly queue: { waiting: number },
    private readonly maxQueueSize: number,
    private readonly onDropped: OtelTracingParts['onDropped'],
  ) {}

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queue.waiting >= this.maxQueueSize) {
      this.onDropped(1, 'queue_full');
      return;
    }
    this.queue.waiting += 1;
    this.batch.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.batch.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.batch.shutdown();
  }
}

/** The OTLP exporter, counting the spans of every export that failed: they are dropped. */
class CountingExporter implements SpanExporter {
  constructor(
    private readonly inner: SpanExporter,
    private readonly queue: { waiting: number; failing: boolean },
    private readonly parts: Pick<OtelTracingParts, 'onDropped' | 'onExportState'>,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.queue.waiting = Math.max(0, this.queue.waiting - spans.length);
    this.inner.export(spans, (result) => {
      const failed = result.code !== ExportResultCode.SUCCESS;
      if (failed) this.parts.onDropped(spans.length, 'export_failed');
      if (failed !== this.queue.failing) {
        this.queue.failing = failed;
        this.parts.onExportState(failed, result.error);
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * Flushes and shuts the provider down, giving up after `timeoutMs` (what is still queued is lost); never
 * rejects.
 */
async function closeWithin(
  provider: BasicTracerProvider,
  timeoutMs: number,
  timers: OtelTracingParts['timers'],
): Promise<void> {
  let timer: ReturnType<typeof timers.setTimeout> | undefined;
  const late = new Promise<void>((resolve) => {
    timer = timers.setTimeout(resolve, timeoutMs);
  });
  try {
    // An export that fails as it closes has counted its spans dropped (`CountingExporter`): no throw.
    await Promise.race([provider.shutdown().catch(() => undefined), late]);
  } finally {
    if (timer !== undefined) timers.clearTimeout(timer);
  }
}
