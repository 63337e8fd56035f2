import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

// What quotagate's HTTP/2 adds overhead to: Node's http2 server, each stream sent upstream over HTTP/1.1
// by an undici pool (as quotagate's own proxy does), the answer's status, type and length relayed.
const [port = '0', target = ''] = process.argv.slice(2);
const pool = new Pool(target, { pipelining: 1 });
const server = http2.createServer();
server.on('stream', (stream, headers) => {
  // A client that goes away mid-answer (h2load at the end of its run) must not end the process.
  stream.on('error', () => undefined);
  pool
    .request({
      path: headers[':path'] ?? '/',
      method: (headers[':method'] ?? 'GET') as 'GET',
      body: stream.endAfterHeaders ? null : stream,
    })
    .then(({ statusCode, headers: answer, body }) => {
      if (stream.destroyed) {
        body.resume();
        return;
      }
      stream.respond({
        ':status': statusCode,
        'content-type': String(answer['content-type'] ?? 'application/octet-stream'),
        ...(answer['content-length'] ? { 'content-length': String(answer['content-length']) } : {}),
      });
      body.on('error', () => stream.destroy()).pipe(stream);
    })
    .catch(() => {
      if (!stream.headersSent) stream.respond({ ':status': 502 });
      stream.end();
    });
});
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
