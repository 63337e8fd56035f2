import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSync, type ServiceDefinition } from '@grpc/proto-loader';

// An OTLP/HTTP traces receiver: a real HTTP server on 127.0.0.1 that decodes what an exporter sends with
// the official definitions (opentelemetry-proto, vendored under test/fixtures/otlp-proto/ at commit
// ac2c4b5d, Apache-2.0), read by @grpc/proto-loader, the protobuf reader the gRPC tests already use;
// OTLP/JSON is read as the spec writes it (ids as hex). No collector binary runs here (no Go toolchain).

/** What the receiver answers: a status (200 takes the spans), or nothing until it closes (a slow one). */
export type OtlpAnswer = number | 'hang';

/** A span as the receiver decoded it. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  events: Array<{ name: string; attributes: Record<string, AttributeValue> }>;
  /** The spans it links to (of its own trace or another). */
  links: Array<{ traceId: string; spanId: string }>;
  /** The resource's attributes (service.name among them). */
  resource: Record<string, AttributeValue>;
}

export interface OtlpReceiver {
  /** The traces URL (`http://127.0.0.1:<port>/v1/traces`). */
  url: string;
  /** The spans of every export answered 200, in the order they came. */
  spans: ReceivedSpan[];
  /** Every export request that came, whatever it was answered, with its content type and span counts. */
  requests: Array<{ contentType: string; spans: number; serverSpans: number }>;
  /** What the next exports are answered. */
  answer: OtlpAnswer;
  /** Resolves once `count` spans were taken (at once when they were). */
  waitForSpans(count: number): Promise<ReceivedSpan[]>;
  /**
   * The server spans taken (one per exchange), once there are `count`: an exchange's child spans
   * (authentication, …) end before it and may come first.
   */
  waitForServerSpans(count: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const protoDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/otlp-proto');

/** An AnyValue: protobuf as decoded names its set field in `value` (oneofs); JSON sets only that one. */
type Value = {
  value?: string;
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: Value[] };
};
/** An attribute's value: a scalar, or a list of them (a string[] attribute). */
export type AttributeValue = string | number | boolean | Array<string | number | boolean>;
type KeyValue = { key: string; value?: Value };
type Ids = Buffer | string;
interface ExportRequest {
  resourceSpans: Array<{
    resource?: { attributes: KeyValue[] };
    scopeSpans: Array<{
      spans: Array<{
        traceId: Ids;
        spanId: Ids;
        parentSpanId?: Ids;
        name: string;
        kind: number;
        attributes?: KeyValue[];
        status?: { code?: number; message?: string };
        events?: Array<{ name: string; attributes?: KeyValue[] }>;
        links?: Array<{ traceId: Ids; spanId: Ids }>;
      }>;
    }>;
  }>;
}

/** OTLP's SpanKind of a server span. */
export const serverKind = 2;

let decodeProtobuf: ((bytes: Buffer) => ExportRequest) | null = null;

/** The OTLP request decoder of the official trace_service.proto. */
function protobufDecoder(): (bytes: Buffer) => ExportRequest {
  if (decodeProtobuf) return decodeProtobuf;
  const definition = loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
    includeDirs: [protoDir],
    longs: String,
    enums: Number,
    arrays: true,
    oneofs: true,
  });
  const service = definition['opentelemetry.proto.collector.trace.v1.TraceService'] as ServiceDefinition;
  decodeProtobuf = service.Export!.requestDeserialize as (bytes: Buffer) => ExportRequest;
  return decodeProtobuf;
}

const hex = (id: Ids | undefined): string =>
  id === undefined ? '' : typeof id === 'string' ? id : id.toString('hex');

function valueOf(value: Value | undefined): AttributeValue {
  if (value === undefined) return '';
  const set =
    value.value ??
    ['stringValue', 'intValue', 'doubleValue', 'boolValue', 'arrayValue'].find((key) => key in value);
  if (set === 'arrayValue')
    return (value.arrayValue?.values ?? []).map((item) => valueOf(item) as string | number | boolean);
  if (set === 'intValue') return Number(value.intValue);
  if (set === 'doubleValue') return value.doubleValue!;
  if (set === 'boolValue') return value.boolValue!;
  return value.stringValue ?? '';
}

const attributesOf = (list: KeyValue[] | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]));

function spansOf(request: ExportRequest): ReceivedSpan[] {
  return request.resourceSpans.flatMap(({ resource, scopeSpans }) =>
    scopeSpans.flatMap(({ spans }) =>
      spans.map((span) => ({
        traceId: hex(span.traceId),
        spanId: hex(span.spanId),
        parentSpanId: hex(span.parentSpanId),
        name: span.name,
        kind: span.kind,
        attributes: attributesOf(span.attributes),
        status: { code: span.status?.code ?? 0, message: span.status?.message ?? '' },
        events: (span.events ?? []).map((event) => ({
          name: event.name,
          attributes: attributesOf(event.attributes),
        })),
        links: (span.links ?? []).map((link) => ({ traceId: hex(link.traceId), spanId: hex(link.spanId) })),
        resource: attributesOf(resource?.attributes),
      })),
    ),
  );
}

/** Starts an OTLP/HTTP receiver on 127.0.0.1 (protobuf and JSON). */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const hanging: ServerResponse[] = [];
  const waiters: Array<{ count: number; wake: () => void }> = [];
  const receiver = {
    url: '',
    spans: [] as ReceivedSpan[],
    requests: [] as OtlpReceiver['requests'],
    answer: 200 as OtlpAnswer,
  };
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const contentType = req.headers['content-type'] ?? '';
      const request = contentType.includes('json')
        ? (JSON.parse(body.toString('utf8')) as ExportRequest)
        : protobufDecoder()(body);
      const spans = spansOf(request);
      receiver.requests.push({
        contentType,
        spans: spans.length,
        serverSpans: spans.filter((span) => span.kind === serverKind).length,
      });
      const { answer } = receiver;
      if (answer === 'hang') {
        hanging.push(res);
        return;
      }
      if (answer === 200) {
        receiver.spans.push(...spans);
        for (const waiter of waiters.splice(0))
          if (receiver.spans.length >= waiter.count) waiter.wake();
          else waiters.push(waiter);
      }
      res.writeHead(answer, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
  return Object.assign(receiver, {
    waitForSpans(count: number): Promise<ReceivedSpan[]> {
      if (receiver.spans.length >= count) return Promise.resolve(receiver.spans);
      return new Promise<ReceivedSpan[]>((resolve) =>
        waiters.push({ count, wake: () => resolve(receiver.spans) }),
      );
    },
    async waitForServerSpans(count: number): Promise<ReceivedSpan[]> {
      const servers = () => receiver.spans.filter((span) => span.kind === serverKind);
      while (servers().length < count) await this.waitForSpans(receiver.spans.length + 1);
      return servers();
    },
    async close() {
      for (const res of hanging.splice(0)) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
