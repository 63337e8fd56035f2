import net, { type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpRelay {
  port: number;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

function closeServer(server: Server, sockets: Set<Socket>): Promise<void> {
  for (const socket of sockets) socket.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** A TCP relay to `target` that counts connections: it shows whether a client went to the server at all. */
export async function startTcpRelay(target: { host: string; port: number }): Promise<TcpRelay> {
  let count = 0;
  const sockets = new Set<Socket>();
  const server = net.createServer((client) => {
    count += 1;
    const upstream = net.connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const port = await listen(server);
  return { port, connections: () => count, close: () => closeServer(server, sockets) };
}

/** A TCP server that accepts connections and never says a word: a hung directory or upstream. */
export async function startSilentServer(): Promise<TcpRelay> {
  let count = 0;
  const sockets = new Set<Socket>();
  const server = net.createServer((socket) => {
    count += 1;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  const port = await listen(server);
  return { port, connections: () => count, close: () => closeServer(server, sockets) };
}
