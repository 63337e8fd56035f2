import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

// The WebSocket bench's upstream: every message is echoed back as it came.
const [port = '0'] = process.argv.slice(2);
const server = http.createServer((_req, res) => res.end('ws only'));
const wss = new WebSocketServer({ server, perMessageDeflate: false });
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
});
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  for (const ws of wss.clients) ws.terminate();
  server.close(() => process.exit(0));
});
