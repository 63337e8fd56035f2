import net from 'node:net';

/**
 * HTTP/2 frames written by hand, for attacks no client sends (a content-length the DATA contradicts,
 * connection-specific fields, upper-case names, CR/LF/NUL, a rapid reset). Fields are encoded as HPACK
 * literals without indexing and without Huffman coding (RFC 7541 §6.2.2), so any bytes go out as given.
 */

export const frameType = { data: 0, headers: 1, rstStream: 3, settings: 4, ping: 6, goaway: 7 } as const;
export const errorCode = { protocol: 1, cancel: 8, refusedStream: 7, enhanceYourCalm: 11 } as const;
const flag = { endStream: 0x1, ack: 0x1, endHeaders: 0x4 } as const;

const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** RFC 7541 §5.1: an integer with an N-bit prefix (the prefix bits of the first byte start at 0). */
function hpackInteger(value: number, prefixBits: number, firstByte = 0): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [firstByte | value];
  const bytes = [firstByte | max];
  let rest = value - max;
  while (rest >= 128) {
    bytes.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return bytes;
}

const hpackString = (text: string): Buffer => {
  const bytes = Buffer.from(text, 'latin1');
  return Buffer.concat([Buffer.from(hpackInteger(bytes.length, 7)), bytes]);
};

/** A header block of literal fields without indexing, each name and value as given (RFC 7541 §6.2.2). */
export const headerBlock = (fields: ReadonlyArray<readonly [string, string]>): Buffer =>
  Buffer.concat(
    fields.flatMap(([name, value]) => [Buffer.from([0x00]), hpackString(name), hpackString(value)]),
  );

export function frame(
  type: number,
  flags: number,
  streamId: number,
  payload: Buffer = Buffer.alloc(0),
): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

export const headersFrame = (
  streamId: number,
  fields: ReadonlyArray<readonly [string, string]>,
  options: { endStream?: boolean } = {},
): Buffer =>
  frame(
    frameType.headers,
    flag.endHeaders | (options.endStream ? flag.endStream : 0),
    streamId,
    headerBlock(fields),
  );

export const dataFrame = (streamId: number, data: string, options: { endStream?: boolean } = {}): Buffer =>
  frame(frameType.data, options.endStream ? flag.endStream : 0, streamId, Buffer.from(data, 'latin1'));

export const rstStreamFrame = (streamId: number, code: number): Buffer => {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(code);
  return frame(frameType.rstStream, 0, streamId, payload);
};

export const pingFrame = (payload: string): Buffer =>
  frame(frameType.ping, 0, 0, Buffer.from(payload.padEnd(8).slice(0, 8), 'latin1'));

/** Sends a PING and resolves on its ACK: the server has read every frame sent before it. */
export async function pinged(connection: RawHttp2Connection, payload = 'probe'): Promise<void> {
  const bytes = Buffer.from(payload.padEnd(8).slice(0, 8), 'latin1');
  connection.send(frame(frameType.ping, 0, 0, bytes));
  await connection.frame(
    (received) =>
      received.type === frameType.ping && (received.flags & flag.ack) !== 0 && received.payload.equals(bytes),
  );
}

/** The fields of a GET of `path` on `authority`, as a client sends them. */
export const requestFields = (
  authority: string,
  path: string,
  extra: ReadonlyArray<readonly [string, string]> = [],
  method = 'GET',
): Array<readonly [string, string]> => [
  [':method', method],
  [':scheme', 'http'],
  [':authority', authority],
  [':path', path],
  ...extra,
];

export interface ReceivedFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** The error code of a RST_STREAM or GOAWAY frame. */
export const errorOf = (received: ReceivedFrame): number =>
  received.type === frameType.goaway ? received.payload.readUInt32BE(4) : received.payload.readUInt32BE(0);

/**
 * The `:status` of a response HEADERS frame when the server encoded it from HPACK's static table (nghttp2
 * does for 200, 204, 206, 304, 400, 404, 500), else null.
 */
export function statusOf(received: ReceivedFrame): number | null {
  const statuses: Record<number, number> = { 8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500 };
  const first = received.payload[0] ?? 0;
  return first & 0x80 ? (statuses[first & 0x7f] ?? null) : null;
}

export interface RawHttp2Connection {
  send(...frames: Buffer[]): void;
  /** Every frame the server sent so far. */
  readonly frames: ReceivedFrame[];
  /** Resolves with the first frame (received or to come) that `matches`; rejects if the connection closes first. */
  frame(matches: (received: ReceivedFrame) => boolean): Promise<ReceivedFrame>;
  /** Resolves once the server has closed the connection. */
  readonly closed: Promise<void>;
  close(): void;
}

/**
 * Opens a TCP connection to an h2c port and sends the preface and an empty SETTINGS; acknowledges the
 * server's SETTINGS and answers its PINGs as a client must. With `bytewise`, the preface goes one byte
 * per write, each a millisecond after the one before (Nagle off), so that the server reads it in pieces.
 */
export function openRawHttp2(port: number, { bytewise = false } = {}): Promise<RawHttp2Connection> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const frames: ReceivedFrame[] = [];
    const waiters: Array<{
      matches: (f: ReceivedFrame) => boolean;
      resolve: (f: ReceivedFrame) => void;
      reject: (e: Error) => void;
    }> = [];
    let buffered = Buffer.alloc(0);
    let ended = false;
    const closed = new Promise<void>((done) => socket.once('close', () => done()));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      ended = true;
      for (const waiter of waiters.splice(0))
        waiter.reject(new Error('the server closed the connection first'));
    });
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 9) {
        const length = buffered.readUIntBE(0, 3);
        if (buffered.length < 9 + length) break;
        const received: ReceivedFrame = {
          type: buffered[3]!,
          flags: buffered[4]!,
          streamId: buffered.readUInt32BE(5) & 0x7fffffff,
          payload: buffered.subarray(9, 9 + length),
        };
        buffered = buffered.subarray(9 + length);
        frames.push(received);
        if (received.type === frameType.settings && !(received.flags & flag.ack))
          socket.write(frame(frameType.settings, flag.ack, 0));
        if (received.type === frameType.ping && !(received.flags & flag.ack))
          socket.write(frame(frameType.ping, flag.ack, 0, received.payload));
        for (let i = waiters.length - 1; i >= 0; i -= 1) {
          if (waiters[i]!.matches(received)) waiters.splice(i, 1)[0]!.resolve(received);
        }
      }
    });
    socket.once('connect', async () => {
      socket.setNoDelay(true);
      const sent = bytewise ? Buffer.alloc(0) : preface;
      for (let i = 0; bytewise && i < preface.length; i += 1) {
        await new Promise((written) => socket.write(preface.subarray(i, i + 1), written));
        await new Promise((paused) => setTimeout(paused, 1));
      }
      socket.write(Buffer.concat([sent, frame(frameType.settings, 0, 0)]));
      resolve({
        send: (...out) => socket.write(Buffer.concat(out)),
        frames,
        frame: (matches) => {
          const seen = frames.find(matches);
          if (seen) return Promise.resolve(seen);
          if (ended) return Promise.reject(new Error('the server closed the connection first'));
          return new Promise((resolveFrame, rejectFrame) =>
            waiters.push({ matches, resolve: resolveFrame, reject: rejectFrame }),
          );
        },
        closed,
        close: () => socket.destroy(),
      });
    });
    socket.once('error', reject);
  });
}
