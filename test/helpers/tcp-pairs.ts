import net, { type AddressInfo, type Socket } from 'node:net';
import { once } from 'node:events';

/** Both ends of one TCP connection on 127.0.0.1, and what each has received so far. */
export interface TcpPair {
  /** The end a server accepted, half-open allowed (as Node's HTTP server accepts its clients). */
  accepted: Socket;
  /** The end that dialed. */
  dialed: Socket;
  /** Every byte `accepted` and `dialed` received, when `record` asked for it. */
  receivedBy: { accepted(): Buffer; dialed(): Buffer };
  /** Destroys both ends and stops listening. */
  close(): Promise<void>;
}

/**
 * Opens a TCP connection to a server of its own on 127.0.0.1:0. With `record`, each end that it names
 * keeps what it receives (reading it, so it flows); an end it does not name is left unread.
 */
export async function tcpPair(record: ReadonlyArray<'accepted' | 'dialed'> = []): Promise<TcpPair> {
  const server = net.createServer({ allowHalfOpen: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepting = once(server, 'connection') as Promise<[Socket]>;
  const dialed = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  const [[accepted]] = await Promise.all([accepting, once(dialed, 'connect')]);
  const received = { accepted: Buffer.alloc(0) as Buffer, dialed: Buffer.alloc(0) as Buffer };
  for (const end of record) {
    const socket = end === 'accepted' ? accepted : dialed;
    socket.on('data', (chunk: Buffer) => {
      received[end] = Buffer.concat([received[end], chunk]);
    });
  }
  for (const socket of [accepted, dialed]) socket.on('error', () => undefined);
  return {
    accepted,
    dialed,
    receivedBy: { accepted: () => received.accepted, dialed: () => received.dialed },
    async close() {
      accepted.destroy();
      dialed.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
