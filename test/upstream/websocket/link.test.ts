import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { WebSocketLink } from '../../../src/upstream/websocket/link.js';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { FakeTimers } from '../../helpers/fake-timers.js';
import { tcpPair } from '../../helpers/tcp-pairs.js';

const defer = cleanupAfterEach();
const interval = 1_000;

/** A frame as an upstream sends it: unmasked (RFC 6455 §5.2), with a payload under 126 bytes. */
const unmasked = (first: number, payload: Buffer) =>
  Buffer.concat([Buffer.from([first, payload.length]), payload]);

/** A frame as a client sends it: masked with `key`, with a payload under 126 bytes. */
function masked(first: number, payload: Buffer, key = Buffer.from([7, 1, 9, 3])): Buffer {
  const hidden = Buffer.from(payload.map((byte, i) => byte ^ key[i % 4]!));
  return Buffer.concat([Buffer.from([first, 0x80 | payload.length]), key, hidden]);
}

/** The payload of the masked close frame at the start of `bytes`, unmasked: its code. */
const maskedCloseCode = (bytes: Buffer) => ((bytes[6]! ^ bytes[2]!) << 8) | (bytes[7]! ^ bytes[3]!);

/**
 * A link between a client and an upstream over two real TCP connections, pinging every second on timers
 * the test moves: `client` and `upstream` are the far ends the test writes from and reads at.
 */
async function linked() {
  const clientSide = await tcpPair(['dialed']);
  const upstreamSide = await tcpPair(['accepted']);
  defer(() => clientSide.close());
  defer(() => upstreamSide.close());
  const timers = new FakeTimers();
  const bytes = { bytesIn: 0, bytesOut: 0, meter: null };
  const link = new WebSocketLink(bytes, clientSide.accepted, upstreamSide.dialed, {
    pingIntervalMs: interval,
    maxFrameBytes: 1_024,
    timers,
  });
  return {
    link,
    timers,
    bytes,
    /** The gateway's end of the client's connection. */
    gatewaySide: clientSide.accepted,
    client: clientSide.dialed,
    upstream: upstreamSide.accepted,
    toClient: clientSide.receivedBy.dialed,
    toUpstream: upstreamSide.receivedBy.accepted,
  };
}

describe('the pings of a WebSocket link', () => {
  it('sends its ping at the end of the frame the upstream is in the middle of, inside a chunk', async () => {
    const { timers, upstream, toClient, bytes } = await linked();
    const first = unmasked(0x82, Buffer.alloc(100, 1));
    const second = unmasked(0x81, Buffer.from('next'));
    upstream.write(first.subarray(0, 40));
    await expect.poll(() => toClient().length).toBe(40);
    timers.advance(interval);
    upstream.write(Buffer.concat([first.subarray(40), second]));
    await expect.poll(() => toClient().length).toBe(first.length + 10 + second.length);
    const ping = toClient().subarray(first.length, first.length + 10);
    expect(ping.subarray(0, 2)).toEqual(Buffer.from([0x89, 8]));
    expect(toClient()).toEqual(Buffer.concat([first, ping, second]));
    // The gateway's own frame is no traffic of the upstream's.
    expect(bytes.bytesOut).toBe(first.length + second.length);
  });

  it("takes the client's pong to its ping out of what the upstream gets, split and between two fragments", async () => {
    const { timers, client, toClient, toUpstream, bytes } = await linked();
    timers.advance(interval);
    await expect.poll(() => toClient().length).toBe(10);
    const pong = masked(0x8a, toClient().subarray(2));
    const start = masked(0x01, Buffer.from('frag'));
    const rest = masked(0x80, Buffer.from('ment'));
    const otherPong = masked(0x8a, Buffer.from('the upstream asked'));
    client.write(Buffer.concat([start, pong.subarray(0, 3)]));
    await expect.poll(() => toUpstream().length).toBe(start.length);
    client.write(Buffer.concat([pong.subarray(3), rest, otherPong]));
    await expect.poll(() => toUpstream().length).toBe(start.length + rest.length + otherPong.length);
    expect(toUpstream()).toEqual(Buffer.concat([start, rest, otherPong]));
    expect(bytes.bytesIn).toBe(toUpstream().length);
  });

  it('keeps open a client that answered only with its pong, and ends one silent for an interval with 1001', async () => {
    const { link, timers, gatewaySide, client, upstream, toClient, toUpstream } = await linked();
    timers.advance(interval);
    await expect.poll(() => toClient().length).toBe(10);
    // The link reads each chunk before this listener, added after it, hears of it.
    const read = once(gatewaySide, 'data');
    client.write(masked(0x8a, toClient().subarray(2)));
    await read;
    timers.advance(interval);
    await expect.poll(() => toClient().length).toBe(20);
    expect(link.endedBy).toBeNull();
    const clientClosed = once(client, 'close');
    const upstreamClosed = once(upstream, 'end');
    timers.advance(interval);
    await Promise.all([clientClosed, upstreamClosed]);
    expect(link.endedBy).toBe('ping_timeout');
    expect(toClient().subarray(20, 22)).toEqual(Buffer.from([0x88, 2 + 'no answer to ping'.length]));
    expect(toClient().readUInt16BE(22)).toBe(1001);
    expect(maskedCloseCode(toUpstream())).toBe(1001);
    expect(toUpstream().length).toBe(6 + 2 + 'no answer to ping'.length);
  });
});

describe('the frames a WebSocket link relays', () => {
  it('ends the connection with 1009 on either side on a frame over its cap, relaying none of it', async () => {
    const { link, client, toClient, toUpstream } = await linked();
    const ended = once(client, 'close');
    client.write(
      Buffer.concat([
        masked(0x81, Buffer.from('fits')),
        Buffer.from([0x82, 0x80 | 126, 0x04, 0x01, 1, 2, 3, 4]),
      ]),
    );
    await ended;
    expect(link.endedBy).toBe('protocol_error');
    expect(toClient().readUInt16BE(2)).toBe(1009);
    // The chunk that broke the cap went nowhere, not even its first frame; the upstream is told 1009.
    expect(maskedCloseCode(toUpstream())).toBe(1009);
  });
});
