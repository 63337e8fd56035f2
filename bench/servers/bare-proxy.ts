import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxyServer } from 'http-proxy-3';

// What quotagate adds overhead to: http-proxy-3 with a keep-alive agent, nothing else.
const [port = '0', target = ''] = process.argv.slice(2);
const agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
const proxy = createProxyServer({ target, agent });
proxy.on('error', (_error, _req, res) => {
  if ('writeHead' in res && !res.headersSent) res.writeHead(502);
  res.end();
});
const server = http.createServer((req, res) => proxy.web(req, res));
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
