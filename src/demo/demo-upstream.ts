import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const pets = [
  { id: 1, name: 'Rex', status: 'available' },
  { id: 2, name: 'Tom', status: 'sold' },
];

/** A tiny pet store for `npm start`: GET /pets, GET /pets/{id}; anything else echoes what it received. */
export async function startDemoUpstream(
  port: number,
  host: string,
): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = http.createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const match = /^\/pets(?:\/(\d+))?\/?(?:\?.*)?$/.exec(req.url ?? '/');
    if (req.method === 'GET' && match) {
      const pet = match[1] ? pets.find((candidate) => candidate.id === Number(match[1])) : undefined;
      if (!match[1]) return send(200, pets);
      return pet ? send(200, pet) : send(404, { message: 'no such pet' });
    }
    send(200, { method: req.method, url: req.url });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
