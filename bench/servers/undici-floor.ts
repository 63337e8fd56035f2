import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

// The floor of any Node gateway (issue 35): http.createServer and undici's Pool.stream, hop-by-hop fields
// dropped, nothing else. quotagate sends upstream with the same pool, so what it costs above this is its own.
const [port = '0', target = ''] = process.argv.slice(2);
const pool = new Pool(target, { pipelining: 1 });
// RFC 9110 §7.6.1: fields of one connection, and those its Connection field names.
const hopByHop = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
];
const endToEnd = (fields: IncomingHttpHeaders) => {
  const kept = { ...fields };
  const named = String(fields.connection ?? '')
    .toLowerCase()
    .split(',');
  for (const name of [...hopByHop, ...named]) delete kept[name.trim()];
  return kept;
};

const server = http.createServer((req, res) => {
  const body = req.headers['content-length'] || req.headers['transfer-encoding'] ? req : null;
  pool
    .stream(
      { path: req.url!, method: req.method as 'GET', headers: endToEnd(req.headers), body },
      (answer) => {
        res.writeHead(answer.statusCode, endToEnd(answer.headers));
        return res;
      },
    )
    .catch(() => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
});
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
