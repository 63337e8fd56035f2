import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxyServer } from 'http-proxy-3';

// What quotagate's WebSocket path adds its work to: http-proxy-3's ws() relaying upgrades, nothing else.
const [port = '0', target = ''] = process.argv.slice(2);
const proxy = createProxyServer({ target, ws: true });
proxy.on('error', (_error, _req, socket) => {
  if ('destroy' in socket) socket.destroy();
});
const server = http.createServer((_req, res) => res.end('ws only'));
server.on('upgrade', (req, socket, head) => proxy.ws(req, socket, head));
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
