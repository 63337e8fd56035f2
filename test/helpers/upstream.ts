import http, {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  socket: Socket;
}

export interface TestUpstream {
  url: string;
  port: number;
  requests: SeenRequest[];
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse, seen: SeenRequest) => void;

const echo: Handler = (_req, res, seen) => {
  const body = JSON.stringify({ method: seen.method, url: seen.url, headers: seen.headers, body: seen.body });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

/**
 * A real upstream on 127.0.0.1:0 (or the loopback address and port given) that records every request; it
 * echoes them unless given a handler.
 */
export async function startUpstream(
  handler: Handler = echo,
  { host = '127.0.0.1', port: wanted = 0 }: { host?: string; port?: number } = {},
): Promise<TestUpstream> {
  const requests: SeenRequest[] = [];
  const server: Server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const seen: SeenRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks).toString('utf8'),
        socket: req.socket,
      };
      requests.push(seen);
      handler(req, res, seen);
    });
  });
  await new Promise<void>((resolve) => server.listen(wanted, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    port,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export interface RawUpstream {
  url: string;
  /** Everything each connection has sent so far, in the order they came. */
  received: string[];
  /** Resolves once some connection has sent `text`. */
  seen(text: string): Promise<void>;
  /** Resolves once the connection that sent `text` has been closed by the gateway. */
  closedAfter(text: string): Promise<void>;
  close(): Promise<void>;
}

/** An upstream that records the bytes it is sent and never answers: what the gateway wrote, exactly. */
export async function startRawUpstream(): Promise<RawUpstream> {
  const received: string[] = [];
  const open = new Set<Socket>();
  const closed = new Set<number>();
  const changed: Array<() => void> = [];
  const wake = () => {
    for (const waiter of changed.splice(0)) waiter();
  };
  const server = net.createServer((socket) => {
    const index = received.push('') - 1;
    open.add(socket);
    socket.on('data', (chunk: Buffer) => {
      received[index] += chunk.toString('latin1');
      wake();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed.add(index);
      open.delete(socket);
      wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const until = (done: () => boolean): Promise<void> =>
    new Promise((resolve) => {
      const check = () => (done() ? resolve() : changed.push(check));
      check();
    });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    seen: (text) => until(() => received.some((bytes) => bytes.includes(text))),
    closedAfter: (text) =>
      until(() => received.some((bytes, index) => bytes.includes(text) && closed.has(index))),
    close: () =>
      new Promise((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
