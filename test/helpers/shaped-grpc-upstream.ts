import http2, {
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo } from 'node:net';

/**
 * A gRPC message as gRPC over HTTP/2 frames one (a compression flag, a 4-byte length, the bytes), of a
 * protobuf whose field 1 is `text` (HelloRequest.name, HelloReply.message), of any length.
 */
export function helloMessage(text: string): Buffer {
  const bytes = Buffer.from(text);
  const length: number[] = [];
  // The field's length as a protobuf varint: 7 bits a byte, the high bit set on all but the last.
  for (let left = bytes.length; ; left >>>= 7) {
    if (left < 0x80) {
      length.push(left);
      break;
    }
    length.push((left & 0x7f) | 0x80);
  }
  const body = Buffer.concat([Buffer.from([0x0a, ...length]), bytes]);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

/** The head of a gRPC answer (HTTP 200, `application/grpc`) with `more` fields. */
export const grpcHead = (more: OutgoingHttpHeaders = {}): OutgoingHttpHeaders => ({
  ':status': 200,
  'content-type': 'application/grpc',
  ...more,
});

export interface ShapedGrpcUpstream {
  /** `http://127.0.0.1:<port>`: h2c, as a gRPC API's upstream. */
  url: string;
  /** `127.0.0.1:<port>`, for a grpc-js client calling it directly. */
  address: string;
  /** Connections (HTTP/2 sessions) it has taken so far. */
  sessions(): number;
  /** Streams opened so far, and those of them closed. */
  opened(): number;
  closed(): number;
  /** Resolves once `count` streams have closed. */
  closedStreams(count: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * An HTTP/2 server (h2c, Node's own) that answers each stream as `answer` shapes it (given the request's
 * head), frame by frame:
 * heads, messages and trailers no gRPC library would send. It counts the streams that closed, and
 * ends the sessions still open when it closes.
 * @param defer the test's cleanups, which close it after the test
 * @param settings the HTTP/2 settings it sends (its `maxConcurrentStreams`, say)
 */
export async function startShapedGrpcUpstream(
  answer: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void,
  defer: (cleanup: () => Promise<void>) => void,
  settings: http2.Settings = {},
): Promise<ShapedGrpcUpstream> {
  const server = http2.createServer({ settings });
  const sessions = new Set<ServerHttp2Session>();
  let sessionsTaken = 0;
  let opened = 0;
  let closed = 0;
  const waiting: Array<{ count: number; resolve: () => void }> = [];
  server.on('session', (session: ServerHttp2Session) => {
    sessionsTaken += 1;
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    opened += 1;
    stream.on('error', () => undefined);
    stream.on('close', () => {
      closed += 1;
      for (const wait of waiting.filter((each) => closed >= each.count)) {
        waiting.splice(waiting.indexOf(wait), 1);
        wait.resolve();
      }
    });
    // The call's message is read and dropped: only the answer is shaped.
    stream.resume();
    answer(stream, headers);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const upstream: ShapedGrpcUpstream = {
    url: `http://127.0.0.1:${port}`,
    address: `127.0.0.1:${port}`,
    sessions: () => sessionsTaken,
    opened: () => opened,
    closed: () => closed,
    closedStreams: (count) =>
      closed >= count ? Promise.resolve() : new Promise((resolve) => waiting.push({ count, resolve })),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const session of sessions) session.destroy();
      }),
  };
  defer(() => upstream.close());
  return upstream;
}
