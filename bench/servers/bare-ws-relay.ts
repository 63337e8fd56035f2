import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';

// What quotagate's WebSocket path is compared with: a `ws` server that opens a `ws` connection upstream
// for each client and relays each message, nothing else.
const [port = '0', target = ''] = process.argv.slice(2);
const relay = new WebSocketServer({ noServer: true });
const server = http.createServer((_req, res) => res.writeHead(426).end());
server.on('upgrade', (req, socket, head) => {
  const upstream = new WebSocket(`${target}${req.url ?? '/'}`);
  upstream.once('error', () => socket.destroy());
  upstream.once('open', () => {
    relay.handleUpgrade(req, socket, head, (client) => {
      client.on('message', (data, isBinary) => upstream.send(data, { binary: isBinary }));
      upstream.on('message', (data, isBinary) => client.send(data, { binary: isBinary }));
      client.once('close', () => upstream.close());
      upstream.once('close', () => client.close());
    });
  });
});
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
