import { describe, expect, it } from 'vitest';
import { closeFrame, FrameBoundaries } from '../../src/upstream/websocket/frames.js';

/** A masked client frame of `payload` bytes (the mask key is zero: the payload reads as sent). */
function clientFrame(payload: number): Buffer {
  const length =
    payload < 126
      ? [0x80 | payload]
      : payload < 65_536
        ? [0x80 | 126, payload >> 8, payload & 0xff]
        : [0x80 | 127, 0, 0, 0, 0, ...[24, 16, 8, 0].map((shift) => (payload >>> shift) & 0xff)];
  return Buffer.concat([Buffer.from([0x82, ...length, 0, 0, 0, 0]), Buffer.alloc(payload, 0x61)]);
}

describe('following the frames of a relayed WebSocket', () => {
  it('knows a boundary after each whole frame, with 7-, 16- and 64-bit lengths', () => {
    const frames = new FrameBoundaries(true);
    for (const payload of [5, 300, 70_000]) {
      expect(frames.read(clientFrame(payload))).toBeNull();
      expect(frames.atBoundary).toBe(true);
    }
  });

  it('knows it is inside a frame when the bytes stop in its head or in its payload', () => {
    const bytes = Buffer.concat([clientFrame(300), clientFrame(10)]);
    const frames = new FrameBoundaries(true);
    // Byte by byte: between the two frames only is it on a boundary.
    const boundaries: number[] = [];
    for (let i = 0; i < bytes.length; i += 1) {
      expect(frames.read(bytes.subarray(i, i + 1))).toBeNull();
      if (frames.atBoundary) boundaries.push(i + 1);
    }
    expect(boundaries).toEqual([4 + 4 + 300, bytes.length]);
  });

  it('refuses an unmasked client frame and a masked upstream frame (RFC 6455 §5.1)', () => {
    expect(new FrameBoundaries(true).read(Buffer.from([0x81, 0x01, 0x61]))).toMatchObject({ code: 1002 });
    expect(new FrameBoundaries(false).read(clientFrame(1))).toMatchObject({ code: 1002 });
    expect(new FrameBoundaries(false).read(Buffer.from([0x81, 0x01, 0x61]))).toBeNull();
  });

  it('refuses a fragmented control frame (RFC 6455 §5.5)', () => {
    expect(new FrameBoundaries(true).read(Buffer.from([0x09, 0x80, 0, 0, 0, 0]))).toMatchObject({
      code: 1002,
    });
  });
});

describe('the close frames the gateway sends', () => {
  it('sends the client an unmasked close frame with the code and reason', () => {
    const frame = closeFrame(1008, 'byte quota exhausted', false);
    expect(frame[0]).toBe(0x88);
    expect(frame[1]).toBe(22);
    expect(frame.readUInt16BE(2)).toBe(1008);
    expect(frame.subarray(4).toString()).toBe('byte quota exhausted');
  });

  it('sends the upstream a masked one, which reads back to the code and reason', () => {
    const frame = closeFrame(1001, 'going away', true);
    expect(frame[1]).toBe(0x80 | 12);
    const key = frame.subarray(2, 6);
    const payload = Buffer.from(frame.subarray(6).map((byte, i) => byte ^ key[i % 4]!));
    expect(payload.readUInt16BE(0)).toBe(1001);
    expect(payload.subarray(2).toString()).toBe('going away');
    expect(new FrameBoundaries(true).read(frame)).toBeNull();
  });
});
