import { spawn, type ChildProcess } from 'node:child_process';
import http, { type ServerResponse } from 'node:http';
import http2, { type ClientHttp2Session, type OutgoingHttpHeaders } from 'node:http2';
import net, { type AddressInfo, type Socket } from 'node:net';
import path from 'node:path';
import { greeterApi } from './grpc-greeter.js';
import { basicAuth, devKey, petsConfig } from './test-gateway.js';

/** The answers a client holds open: a plain body, an event stream, a server-streaming gRPC call. */
export type HeldKind = 'plain' | 'events' | 'grpc';
export const heldKinds: HeldKind[] = ['plain', 'events', 'grpc'];

/**
 * A gRPC message as gRPC over HTTP/2 frames one (a compression flag, a 4-byte length, the bytes), of a
 * protobuf whose field 1 is `text` (HelloRequest.name, HelloReply.message).
 */
function grpcMessage(text: string): Buffer {
  const body = Buffer.concat([Buffer.from([0x0a, text.length]), Buffer.from(text)]);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

export interface HeldStreamUpstreams {
  /** The catalog of a gateway in front of them: the Pet Store (HTTP/1.1) and the Greeter (gRPC, h2c). */
  apis: unknown[];
  /** Answers begun and not yet closed, upstream, of every kind. */
  open(): number;
  close(): Promise<void>;
}

/**
 * Upstreams that answer each request with its first bytes and then hold the answer open until its
 * exchange is cut, counting the answers still open: `/pets/plain-…` a plain body and `/pets/events-…`
 * an event stream over HTTP/1.1 (any other path `ok`), and `ListHellos` a gRPC server-streaming call
 * over h2c, one message and no end.
 */
export async function startHeldStreamUpstreams(): Promise<HeldStreamUpstreams> {
  const open = new Set<object>();
  const hold = (answer: object, closing: { once(event: 'close', listener: () => void): unknown }) => {
    open.add(answer);
    closing.once('close', () => open.delete(answer));
  };
  const plain = http.createServer((req, res: ServerResponse) => {
    if (req.url?.startsWith('/pets/plain-')) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('the first of many chunks\n');
    } else if (req.url?.startsWith('/pets/events-')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
    } else {
      res.end('ok');
      return;
    }
    hold(res, res);
  });
  const grpc = http2.createServer();
  grpc.on('stream', (stream) => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
    stream.write(grpcMessage('Hello #1'));
    hold(stream, stream);
    stream.on('error', () => undefined);
    stream.resume();
  });
  const portOf = async (server: net.Server) => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  };
  const [plainPort, grpcPort] = [await portOf(plain), await portOf(grpc)];
  const sessions = new Set<http2.ServerHttp2Session>();
  grpc.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  return {
    apis: [
      ...(petsConfig(`http://127.0.0.1:${plainPort}/pets`).apis as unknown[]),
      greeterApi(`http://127.0.0.1:${grpcPort}`),
    ],
    open: () => open.size,
    close: async () => {
      plain.closeAllConnections();
      for (const session of sessions) session.destroy();
      await Promise.all([plain, grpc].map((server) => new Promise((resolve) => server.close(resolve))));
    },
  };
}

/** What a client sends for an answer of `kind`: its HTTP/2 head, tagged with `requestId`, and its body. */
export interface HeldRequest {
  headers: OutgoingHttpHeaders;
  body: Buffer | null;
}

export function heldRequest(kind: HeldKind, requestId: string): HeldRequest {
  const common = { authorization: basicAuth(devKey), 'x-request-id': requestId };
  if (kind !== 'grpc') return { headers: { ':path': `/pets/${kind}-${requestId}`, ...common }, body: null };
  return {
    headers: {
      ':method': 'POST',
      ':path': '/helloworld.Greeter/ListHellos',
      'content-type': 'application/grpc',
      te: 'trailers',
      ...common,
    },
    body: grpcMessage('held'),
  };
}

/** Sends `requests` on `session`; resolves once each answer's first bytes have come. */
export function openHeldStreams(session: ClientHttp2Session, requests: HeldRequest[]): Promise<void[]> {
  return Promise.all(
    requests.map(({ headers, body }) => {
      const stream = session.request(headers);
      stream.on('error', () => undefined);
      stream.end(body ?? undefined);
      return new Promise<void>((resolve) => stream.once('data', () => resolve()));
    }),
  );
}

const holder = path.resolve('test/fixtures/http2/hold-streams.mjs');

/**
 * A child process that opens an h2c session to `url` with `requests` on it; resolves once each answer's
 * first bytes have come, with the child (which holds them until it is killed).
 */
export async function holdStreamsInChild(url: string, requests: HeldRequest[]): Promise<ChildProcess> {
  const sent = requests.map(({ headers, body }) => ({ headers, body: body?.toString('base64') ?? null }));
  const child = spawn(process.execPath, [holder, url, JSON.stringify(sent)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let said = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      said += chunk.toString();
      if (said.includes('open')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the holding client exited first (${code})`)));
  });
  return child;
}

export interface FreezableRelay {
  port: number;
  /** From now on, nothing passes either way, and no side is closed: the client has vanished. */
  freeze(): void;
  close(): void;
}

/** A TCP relay to 127.0.0.1:`port` that can be frozen: a client behind it vanishes without a FIN or a RST. */
export async function startFreezableRelay(port: number): Promise<FreezableRelay> {
  const pairs: Array<[Socket, Socket]> = [];
  const server = net.createServer((client) => {
    const target = net.connect(port, '127.0.0.1');
    for (const socket of [client, target]) socket.on('error', () => undefined);
    client.pipe(target).pipe(client);
    pairs.push([client, target]);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    freeze() {
      for (const [client, target] of pairs) {
        client.unpipe(target);
        target.unpipe(client);
        client.pause();
        target.pause();
      }
    },
    close() {
      for (const socket of pairs.flat()) socket.destroy();
      server.close();
    },
  };
}
