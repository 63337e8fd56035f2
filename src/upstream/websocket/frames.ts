import { randomBytes } from 'node:crypto';

/** Why a side's frames cannot be relayed further, as the close code RFC 6455 §7.4.1 gives it. */
export interface FrameProblem {
  /** 1002: a protocol error; 1009: a frame too big to relay. */
  code: 1002 | 1009;
  reason: string;
}

/**
 * Where `FrameBoundaries.readTo` stops short of a chunk's end: `frameEnd` where the frame it is in (or
 * the next, from a boundary) ends; `pongStart` past the first byte of a pong frame (RFC 6455 §5.5.3).
 */
export type FrameStop = 'chunkEnd' | 'frameEnd' | 'pongStart';

/** The opcode of a pong frame (RFC 6455 §5.2). */
const pongOpcode = 0xa;

/**
 * Follows the frames of one direction of a WebSocket (RFC 6455 §5.2) as their bytes are relayed,
 * without copying a payload: it reads each frame's head and skips its payload, so it knows whether the
 * bytes relayed so far end on a frame boundary (where a frame of the gateway's own may follow).
 * It checks what a relay must (§5.1: a client masks every frame and a server none; §5.5: a control
 * frame carries at most 125 bytes and is not fragmented; §5.2: a 64-bit length has its top bit clear),
 * and that no frame carries more than the relay takes.
 */
export class FrameBoundaries {
  private readonly head = Buffer.alloc(14);
  private headBytes = 0;
  /** Payload bytes of the current frame still to come. */
  private remaining = 0;
  /** Why the bytes read break the protocol, once they do: nothing is read after it. */
  problem: FrameProblem | null = null;

  /**
   * @param fromClient frames a client sends, which must be masked; an upstream's must not be.
   * @param largestPayload the largest payload relayed, in bytes: a larger frame is a 1009. Beyond
   *   2^53 - 1 a byte count is no longer exact.
   */
  constructor(
    private readonly fromClient: boolean,
    private readonly largestPayload = Number.MAX_SAFE_INTEGER,
  ) {}

  /** Whether the bytes read so far end where a frame does. */
  get atBoundary(): boolean {
    return this.remaining === 0 && this.headBytes === 0;
  }

  /** Whether the last byte read is the first of a pong frame (where `readTo` stops at `pongStart`). */
  get pongStarted(): boolean {
    return this.headBytes === 1 && (this.head[0]! & 0x0f) === pongOpcode;
  }

  /** Reads the next relayed bytes; returns why they break the protocol, or null. */
  read(chunk: Buffer): FrameProblem | null {
    this.readTo(chunk, 0, 'chunkEnd');
    return this.problem;
  }

  /**
   * Reads `chunk` from `at` on, up to its end or up to `stop`, and returns where it stopped; where a
   * problem was found when `problem` is set.
   */
  readTo(chunk: Buffer, at: number, stop: FrameStop): number {
    while (at < chunk.length && this.problem === null) {
      if (this.remaining > 0) {
        const skipped = Math.min(this.remaining, chunk.length - at);
        this.remaining -= skipped;
        at += skipped;
        if (this.remaining === 0 && stop === 'frameEnd') return at;
        continue;
      }
      this.head[this.headBytes] = chunk[at]!;
      this.headBytes += 1;
      at += 1;
      if (stop === 'pongStart' && this.pongStarted) return at;
      const length = headLength(this.head, this.headBytes);
      if (length === 0 || this.headBytes < length) continue;
      this.problem = this.frameProblem();
      this.remaining = this.payloadLength();
      this.headBytes = 0;
      if (this.remaining === 0 && stop === 'frameEnd') return at;
    }
    return at;
  }

  private frameProblem(): FrameProblem | null {
    const first = this.head[0]!;
    const second = this.head[1]!;
    if ((second & 0x80) === 0 && this.fromClient)
      return { code: 1002, reason: 'a client frame must be masked' };
    if ((second & 0x80) !== 0 && !this.fromClient)
      return { code: 1002, reason: 'a server frame must not be masked' };
    const control = (first & 0x08) !== 0;
    if (control && ((second & 0x7f) > 125 || (first & 0x80) === 0))
      return { code: 1002, reason: 'a control frame must be whole and at most 125 bytes' };
    if ((second & 0x7f) === 127 && (this.head[2]! & 0x80) !== 0)
      return { code: 1002, reason: 'a 64-bit payload length must have its top bit clear' };
    if (this.payloadLength() > this.largestPayload) return { code: 1009, reason: 'frame too big' };
    return null;
  }

  private payloadLength(): number {
    const short = this.head[1]! & 0x7f;
    if (short === 126) return this.head.readUInt16BE(2);
    if (short === 127) return this.head.readUInt32BE(2) * 2 ** 32 + this.head.readUInt32BE(6);
    return short;
  }
}

/** The length of a frame head from its first `have` bytes, or 0 while the second byte is missing. */
function headLength(head: Buffer, have: number): number {
  if (have < 2) return 0;
  const short = head[1]! & 0x7f;
  const extended = short === 126 ? 2 : short === 127 ? 8 : 0;
  return 2 + extended + ((head[1]! & 0x80) !== 0 ? 4 : 0);
}

/** An unmasked ping frame (RFC 6455 §5.5.2) that carries `payload` (at most 125 bytes), for a client. */
export function pingFrame(payload: Buffer): Buffer {
  return Buffer.concat([Buffer.from([0x89, payload.length]), payload]);
}

/**
 * Whether `frame`, a whole masked pong frame of a client (at most 131 bytes: its head, its mask key and
 * at most 125 bytes of payload), answers a ping that carried `payload` (RFC 6455 §5.5.3).
 */
export function answersPing(frame: Buffer, payload: Buffer): boolean {
  if ((frame[1]! & 0x7f) !== payload.length) return false;
  for (let i = 0; i < payload.length; i += 1) {
    if ((frame[6 + i]! ^ frame[2 + (i % 4)]!) !== payload[i]) return false;
  }
  return true;
}

/**
 * A close frame (RFC 6455 §5.5.1) with `code` and a short `reason` (at most 123 bytes). One the gateway
 * sends upstream is masked, as a client's must be (§5.3), with a key of its own.
 */
export function closeFrame(code: number, reason: string, masked: boolean): Buffer {
  const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
  payload.writeUInt16BE(code, 0);
  payload.write(reason, 2);
  const head = Buffer.from([0x88, payload.length | (masked ? 0x80 : 0)]);
  if (!masked) return Buffer.concat([head, payload]);
  const key = randomBytes(4);
  for (let i = 0; i < payload.length; i += 1) payload[i]! ^= key[i % 4]!;
  return Buffer.concat([head, key, payload]);
}
