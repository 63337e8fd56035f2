import { once } from 'node:events';
import { createServer, type Server } from 'node:net';

export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  if (port === undefined) throw new Error('Expected one free port');
  return port;
}

/** Distinct free ports: every probe stays open until all have a port, so none is handed out twice. */
export async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  try {
    return await Promise.all(servers.map(listeningPort));
  } finally {
    await Promise.all(servers.map(closeServer));
  }
}

async function listeningPort(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') {
    throw new Error(`Expected a TCP address, got ${String(address)}`);
  }
  return address.port;
}

function closeServer(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
}
