import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

// The upstream of the WebSocket rows: every message comes back as it was sent.
const [port = '0'] = process.argv.slice(2);
const server = new WebSocketServer({ host: '127.0.0.1', port: Number(port) }, () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
server.on('connection', (socket) => {
  socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
