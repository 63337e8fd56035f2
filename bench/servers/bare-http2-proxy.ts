import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { pipeline } from 'node:stream';
import { Pool } from 'undici';

// What quotagate's HTTP/2 path is compared with: a node:http2 server (h2c, prior knowledge) that sends
// each stream upstream over HTTP/1.1 with undici, connection-specific fields dropped, nothing else.
const [port = '0', target = ''] = process.argv.slice(2);
const pool = new Pool(target, { pipelining: 1 });
// RFC 9113 §8.2.2 and RFC 9110 §7.6.1: fields that belong to one connection, and the pseudo-headers.
const dropped = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
]);

const server = http2.createServer();
// As Node's HTTP/1.1 server does by default: small answers leave at once, not after a delayed ACK.
server.on('connection', (socket: Socket) => socket.setNoDelay(true));
server.on('stream', (stream, headers) => {
  // A client that goes away mid-answer (h2load at the end of its run) must not end the process.
  stream.on('error', () => undefined);
  const fields: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(':') || dropped.has(name) || value === undefined) continue;
    fields.push(name, Array.isArray(value) ? value.join(', ') : String(value));
  }
  fields.push('host', String(headers[':authority'] ?? ''));
  const method = String(headers[':method']);
  pool
    .request({
      path: String(headers[':path']),
      method: method as 'GET',
      headers: fields,
      body: method === 'GET' || method === 'HEAD' ? null : stream,
    })
    .then(({ statusCode, headers: answer, body }) => {
      if (stream.destroyed) {
        body.resume();
        return;
      }
      const response: http2.OutgoingHttpHeaders = { ':status': statusCode };
      for (const [name, value] of Object.entries(answer)) {
        if (!dropped.has(name) && value !== undefined) response[name] = value;
      }
      stream.respond(response);
      pipeline(body, stream, () => undefined);
    })
    .catch(() => {
      if (stream.destroyed) return;
      if (!stream.headersSent) stream.respond({ ':status': 502 }, { endStream: true });
      else stream.close();
    });
});
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
