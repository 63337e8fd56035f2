import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';

// A relay written with the `ws` package: each message read whole from one side and sent to the other,
// as a gateway that handles messages (not bytes) does.
const [port = '0', target = ''] = process.argv.slice(2);
const server = http.createServer((_req, res) => res.end('ws only'));
const wss = new WebSocketServer({ server, perMessageDeflate: false });
wss.on('connection', (client, req) => {
  const upstream = new WebSocket(`${target.replace(/^http/, 'ws')}${req.url ?? '/'}`, {
    perMessageDeflate: false,
  });
  const waiting: Array<[WebSocket.RawData, boolean]> = [];
  client.on('message', (data, isBinary) => {
    if (upstream.readyState === WebSocket.OPEN) upstream.send(data, { binary: isBinary });
    else waiting.push([data, isBinary]);
  });
  upstream.on('open', () => {
    for (const [data, isBinary] of waiting.splice(0)) upstream.send(data, { binary: isBinary });
  });
  upstream.on('message', (data, isBinary) => client.send(data, { binary: isBinary }));
  client.on('close', () => upstream.close());
  upstream.on('close', () => client.close());
  client.on('error', () => upstream.terminate());
  upstream.on('error', () => client.terminate());
});
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  for (const ws of wss.clients) ws.terminate();
  server.close(() => process.exit(0));
});
