import WebSocket from 'ws';

// The load of a WebSocket row, in its own process: `connections` sockets, each sending a 64-byte text
// message and the next as soon as the echo comes back, for `seconds`; prints what was echoed, as JSON.
const [url = '', connections = '10', seconds = '5', headerJson = '{}'] = process.argv.slice(2);
const headers = JSON.parse(headerJson) as Record<string, string>;
const message = 'x'.repeat(64);
let echoed = 0;
let failed = 0;
let running = true;

function open(): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers, perMessageDeflate: false });
    socket.once('open', () => resolve(socket));
    socket.once('unexpected-response', (_req, res) =>
      reject(new Error(`upgrade answered ${res.statusCode}`)),
    );
    socket.once('error', reject);
  });
}

const sockets = await Promise.all(Array.from({ length: Number(connections) }, open));
for (const socket of sockets) {
  socket.on('message', () => {
    echoed += 1;
    if (running) socket.send(message);
  });
  socket.on('error', () => (failed += 1));
  socket.send(message);
}
await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
running = false;
for (const socket of sockets) socket.terminate();
process.stdout.write(`${JSON.stringify({ echoed, failed })}\n`);
