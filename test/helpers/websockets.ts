import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';

/** What a WebSocket upstream saw of one opening handshake. */
export interface SeenUpgrade {
  url: string;
  headers: IncomingHttpHeaders;
}

export interface WebSocketUpstream {
  /** `http://127.0.0.1:<port>`, for an API's `upstream`. */
  url: string;
  upgrades: SeenUpgrade[];
  /** The upstream's side of every WebSocket it accepted, in order. */
  sockets: WebSocket[];
  /** Every message it received, as text. */
  received: string[];
  /** Every plain (not upgraded) request it received. */
  plain: SeenUpgrade[];
  close(): Promise<void>;
}

/**
 * A real WebSocket upstream on 127.0.0.1:0 (the `ws` package) that echoes every message; an upgrade to a
 * path under `/refused` is answered `403` with a body instead of 101, and a plain request `200 plain`;
 * with `perMessageDeflate` it accepts compressed messages (RFC 7692). With `greeting` it speaks first,
 * as Socket.IO's `open` packet or a banner does: it sends `greeting` as it accepts a WebSocket, in the
 * same write as its `101` (the socket is corked around both), so that they arrive together.
 */
export async function startWebSocketUpstream(
  options: { perMessageDeflate?: boolean; greeting?: string } = {},
): Promise<WebSocketUpstream> {
  const upgrades: SeenUpgrade[] = [];
  const sockets: WebSocket[] = [];
  const received: string[] = [];
  const plain: SeenUpgrade[] = [];
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: options.perMessageDeflate ?? false });
  const server = http.createServer((req, res) => {
    plain.push({ url: req.url ?? '', headers: req.headers });
    res.end('plain');
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    upgrades.push({ url: req.url ?? '', headers: req.headers });
    if (req.url?.includes('/refused')) {
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 7\r\n\r\nrefused');
      return;
    }
    if (options.greeting !== undefined) socket.cork();
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.push(ws);
      ws.on('message', (data, isBinary) => {
        received.push(data.toString());
        ws.send(data, { binary: isBinary });
      });
      if (options.greeting !== undefined) ws.send(options.greeting);
    });
    if (options.greeting !== undefined) socket.uncork();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    upgrades,
    sockets,
    received,
    plain,
    async close() {
      for (const ws of sockets) ws.terminate();
      wss.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/** A refused opening handshake as the client saw it: an ordinary HTTP answer, never a 101. */
export interface RefusedUpgrade {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** An opened WebSocket, with the headers of the 101 that opened it. */
export interface OpenedWebSocket {
  ws: WebSocket;
  headers: IncomingHttpHeaders;
}

/**
 * Opens a WebSocket to `url` (`ws://…`, or `wss://…` trusting `trust.ca`) with the `ws` client; resolves
 * with it once open, or with the HTTP answer that refused it.
 */
export function openWebSocket(
  url: string,
  headers: Record<string, string> = {},
  trust: { ca?: string } = {},
): Promise<OpenedWebSocket | RefusedUpgrade> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, ...trust });
    ws.once('upgrade', (res: IncomingMessage) => {
      ws.once('open', () => resolve({ ws, headers: res.headers }));
    });
    ws.once('unexpected-response', (_req, res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    ws.once('error', reject);
  });
}

/** Opens a WebSocket that must open; fails the test with the refusal otherwise. */
export async function mustOpen(
  url: string,
  headers: Record<string, string> = {},
  trust: { ca?: string } = {},
): Promise<OpenedWebSocket> {
  const opened = await openWebSocket(url, headers, trust);
  if (!('ws' in opened)) throw new Error(`refused: ${opened.status} ${opened.body}`);
  return opened;
}

/** Opens a WebSocket that must be refused; fails the test if it opens. */
export async function mustRefuse(url: string, headers: Record<string, string> = {}): Promise<RefusedUpgrade> {
  const opened = await openWebSocket(url, headers);
  if ('ws' in opened) {
    opened.ws.terminate();
    throw new Error('the WebSocket opened');
  }
  return opened;
}

/** Sends `text` and resolves with the next message. */
export function echo(ws: WebSocket, text: string): Promise<string> {
  return new Promise((resolve) => {
    ws.once('message', (data) => resolve(data.toString()));
    ws.send(text);
  });
}

/** Resolves with the close code and reason once the WebSocket has closed. */
export function closed(ws: WebSocket): Promise<{ code: number; reason: string }> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve({ code: 1006, reason: '' });
  return new Promise((resolve) => {
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }));
  });
}

/** `http://…` of a gateway as `ws://…`. */
export const wsUrl = (httpUrl: string, path: string) => `${httpUrl.replace(/^http/, 'ws')}${path}`;

/** A valid `Sec-WebSocket-Key` (RFC 6455 §4.1: 16 bytes in base64). */
export const validKey = 'dGhlIHNhbXBsZSBub25jZQ==';

/** The head of a WebSocket opening handshake for `path`, with `fields` (lines, without CRLF) added. */
export const handshake = (path: string, fields: string[] = []) =>
  [
    `GET ${path} HTTP/1.1`,
    'Host: gw',
    'Upgrade: websocket',
    'Connection: Upgrade',
    `Sec-WebSocket-Key: ${validKey}`,
    'Sec-WebSocket-Version: 13',
    ...fields,
    '',
    '',
  ].join('\r\n');

/** A raw connection that has opened a WebSocket: what it received after the 101, and its end. */
export interface RawWebSocket {
  socket: Socket;
  /** The bytes received after the 101's head. */
  received(): Buffer;
  /** Resolves once the gateway has closed the connection. */
  closed: Promise<void>;
}

/** Opens a WebSocket on a raw socket with `head` (a handshake), for frames a real client never sends. */
export function rawWebSocket(baseUrl: string, head: string): Promise<RawWebSocket> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname);
    let bytes = Buffer.alloc(0);
    let opened = false;
    const closed = new Promise<void>((done) => socket.on('close', () => done()));
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      bytes = Buffer.concat([bytes, chunk]);
      const end = bytes.indexOf('\r\n\r\n');
      if (opened || end === -1) return;
      opened = true;
      const status = bytes.subarray(0, end).toString('latin1');
      if (!status.startsWith('HTTP/1.1 101')) reject(new Error(`not opened: ${status}`));
      bytes = bytes.subarray(end + 4);
      resolve({ socket, received: () => bytes, closed });
    });
    socket.write(head, 'latin1');
  });
}

/** A frame head as bytes: `first` (FIN, opcode), then a length byte and what follows it. */
export const frame = (...bytes: number[]) => Buffer.from(bytes);

/** The close code of the close frame at the start of `bytes` (unmasked, from the gateway), or null. */
export function closeCodeOf(bytes: Buffer): number | null {
  if (bytes.length < 4 || bytes[0] !== 0x88) return null;
  return bytes.readUInt16BE(2);
}

/** What a flooding WebSocket upstream moved: payload bytes it received from its clients. */
export interface FloodingUpstream {
  url: string;
  /** Payload bytes received so far, from every client. */
  receivedBytes(): number;
  /** The upstream's side of every WebSocket it accepted, in order. */
  sockets: WebSocket[];
  close(): Promise<void>;
}

/**
 * A real `ws` upstream that speaks first (`welcome`), echoes every message, and on a WebSocket opened
 * on a path ending `/flood` sends `frames` messages of `frameBytes` at once (as fast as its socket
 * takes them), as a server pushing a feed does. It accepts permessage-deflate when offered.
 */
export async function startFloodingUpstream(frames: number, frameBytes: number): Promise<FloodingUpstream> {
  const sockets: WebSocket[] = [];
  let received = 0;
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: true });
  const payload = 'u'.repeat(frameBytes);
  wss.on('connection', (ws, req) => {
    sockets.push(ws);
    ws.on('error', () => undefined);
    ws.send('welcome');
    ws.on('message', (data: Buffer) => {
      received += data.length;
      if (ws.readyState === WebSocket.OPEN) ws.send(data);
    });
    if (req.url?.endsWith('/flood')) for (let i = 0; i < frames; i += 1) ws.send(payload);
  });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const { port } = wss.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    receivedBytes: () => received,
    sockets,
    async close() {
      for (const ws of sockets) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

/** A `ws` client opened for a flood: what it received, in payload bytes, and how it closed. */
export interface FloodingClient {
  ws: WebSocket;
  received(): number;
  closed: Promise<{ code: number; reason: string }>;
  /** Sends `frames` messages of `frameBytes` as fast as it can, while it is open. */
  flood(frames: number, frameBytes: number): void;
}

/** Opens a WebSocket with the `ws` client (which offers permessage-deflate), ready to flood. */
export async function floodingClient(url: string, headers: Record<string, string>): Promise<FloodingClient> {
  const { ws } = await mustOpen(url, headers);
  let received = 0;
  ws.on('message', (data: Buffer) => {
    received += data.length;
  });
  ws.on('error', () => undefined);
  return {
    ws,
    received: () => received,
    closed: closed(ws),
    flood(frames, frameBytes) {
      const payload = 'c'.repeat(frameBytes);
      for (let i = 0; i < frames && ws.readyState === WebSocket.OPEN; i += 1) ws.send(payload);
    },
  };
}
