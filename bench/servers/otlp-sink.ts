import http from 'node:http';
import type { AddressInfo } from 'node:net';

// Where the tracing rows export: an OTLP/HTTP traces endpoint that takes every POST /v1/traces and answers
// 200 with an empty ExportTraceServiceResponse (zero bytes of protobuf), as a collector that keeps up
// does. It counts what it took; GET /stats answers { exports, bytes, spans }.

/**
 * The spans of an ExportTraceServiceRequest, counted on the protobuf wire without decoding them:
 * resource_spans (1) → scope_spans (2) → spans (2), each a length-delimited field.
 */
function spansIn(bytes: Buffer): number {
  let spans = 0;
  for (const resourceSpans of fieldsOf(bytes, 1))
    for (const scopeSpans of fieldsOf(resourceSpans, 2)) spans += fieldsOf(scopeSpans, 2).length;
  return spans;
}

/** The length-delimited fields numbered `wanted` of a message; other fields are skipped by wire type. */
function fieldsOf(message: Buffer, wanted: number): Buffer[] {
  const found: Buffer[] = [];
  let at = 0;
  const varint = () => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = message[at++]!;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < message.length) {
    const key = varint();
    const [field, type] = [Math.floor(key / 8), key % 8];
    if (type === 0) varint();
    else if (type === 1) at += 8;
    else if (type === 5) at += 4;
    else if (type === 2) {
      const length = varint();
      if (field === wanted) found.push(message.subarray(at, at + length));
      at += length;
    } else throw new Error(`wire type ${type} in an OTLP request`);
  }
  return found;
}

const stats = { exports: 0, bytes: 0, spans: 0 };
const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    if (req.method !== 'POST' || req.url !== '/v1/traces') {
      res.writeHead(404).end();
      return;
    }
    const body = Buffer.concat(chunks);
    let spans: number;
    try {
      spans = spansIn(body);
    } catch {
      // The gateway exports protobuf: anything else is a mistake of the bench, said by a 400.
      res.writeHead(400).end();
      return;
    }
    stats.exports += 1;
    stats.bytes += body.length;
    stats.spans += spans;
    res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 0 }).end();
  });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
