import { randomBytes } from 'node:crypto';

/** Why a side's frames cannot be relayed further, as the close code RFC 6455 §7.4.1 gives it. */
export interface FrameProblem {
  /** 1002: a protocol error; 1009: a frame too big to relay. */
  code: 1002 | 1009;
  reason: string;
}

/** The largest payload length the relay follows: beyond it a byte count is no longer exact. */
const largestPayload = Number.MAX_SAFE_INTEGER;

/**
 * Follows the frames of one direction of a WebSocket (RFC 6455 §5.2) as their bytes are relayed,
 * without copying a payload: it reads each frame's head and skips its payload, so it knows whether the
 * bytes relayed so far end on a frame boundary (where a close frame of the gateway's own may follow).
 * It checks what a relay must (§5.1: a client masks every frame and a server none; §5.5: a control
 * frame carries at most 125 bytes and is not fragmented; §5.2: a 64-bit length has its top bit clear).
 */
export class FrameBoundaries {
  private readonly head = Buffer.alloc(14);
  private headBytes = 0;
  /** Payload bytes of the current frame still to come. */
  private remaining = 0;

  /** @param fromClient frames a client sends, which must be masked; an upstream's must not be. */
  constructor(private readonly fromClient: boolean) {}

  /** Whether the bytes read so far end where a frame does. */
  get atBoundary(): boolean {
    return this.remaining === 0 && this.headBytes === 0;
  }

  /** Reads the next relayed bytes; returns why they break the protocol, or null. */
  read(chunk: Buffer): FrameProblem | null {
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining > 0) {
        const skipped = Math.min(this.remaining, chunk.length - at);
        this.remaining -= skipped;
        at += skipped;
        continue;
      }
      this.head[this.headBytes] = chunk[at]!;
      this.headBytes += 1;
      at += 1;
      const length = headLength(this.head, this.headBytes);
      if (length === 0 || this.headBytes < length) continue;
      const problem = this.frameProblem();
      if (problem) return problem;
      this.remaining = this.payloadLength();
      this.headBytes = 0;
    }
    return null;
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
    if (this.payloadLength() > largestPayload) return { code: 1009, reason: 'frame too big' };
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
