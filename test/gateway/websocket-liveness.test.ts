import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import {
  accessLines,
  basicAuth,
  concurrency,
  devKey,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import {
  closeCodeOf,
  closed,
  echo,
  frame,
  handshake,
  mustOpen,
  mustRefuse,
  rawWebSocket,
  startWebSocketUpstream,
  wsUrl,
} from '../helpers/websockets.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

const defer = cleanupAfterEach();
const upstream = useSuiteUpstream(() => startWebSocketUpstream());

const withKey = { authorization: basicAuth(devKey) };
const authorization = `Authorization: ${withKey.authorization}`;
const interval = 30_000;

async function gatewayWith(
  server: Record<string, unknown> = {},
): Promise<{ gateway: TestGateway; timers: FakeTimers }> {
  const timers = new FakeTimers();
  const gateway = await startTestGateway(petsConfig(upstream().url, { server }), {}, { timers });
  defer(() => gateway.close());
  return { gateway, timers };
}

/** Resolves with the close code the upstream's side of its last WebSocket gets. */
function upstreamCloseCode(): Promise<number> {
  return new Promise((resolve) =>
    upstream()
      .sockets.at(-1)!
      .once('close', (code: number) => resolve(code)),
  );
}

describe('a WebSocket client that answers nothing', () => {
  it('is pinged, ended with 1001 one interval later, and its concurrency slot freed', async () => {
    const { gateway, timers } = await gatewayWith();
    await setQuota(gateway, { type: 'API', name: 'System', restrictions: [concurrency(1)] }, systemQuotaId);
    // It completes the handshake, then never sends a byte.
    const silent = await rawWebSocket(gateway.url, handshake('/pets/1', [authorization]));
    const upstreamClosed = upstreamCloseCode();
    expect((await mustRefuse(wsUrl(gateway.url, '/pets/1'), withKey)).status).toBe(429);
    timers.advance(interval);
    // An unmasked ping with the gateway's 8 bytes (RFC 6455 §5.5.2).
    await expect.poll(() => silent.received().length).toBe(10);
    expect(silent.received()[0]).toBe(0x89);
    timers.advance(interval);
    await silent.closed;
    expect(closeCodeOf(silent.received().subarray(10))).toBe(1001);
    expect(await upstreamClosed).toBe(1001);
    await expect
      .poll(() => accessLines(gateway).find((line) => line.status === 101))
      .toMatchObject({ webSocket: 'ping_timeout', bytesIn: 0 });
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(await echo(ws, 'the slot is free')).toBe('the slot is free');
    ws.close();
  });
});

describe('a WebSocket client that answers the pings', () => {
  it('stays open interval after interval, its pongs never reaching the upstream', async () => {
    const { gateway, timers } = await gatewayWith();
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    const upstreamSide = upstream().sockets.at(-1)!;
    const pongsUpstream: string[] = [];
    upstreamSide.on('pong', (data: Buffer) => pongsUpstream.push(data.toString()));
    for (let i = 0; i < 4; i += 1) {
      const pinged = once(ws, 'ping');
      timers.advance(interval);
      await pinged;
      // The client's pong went before this message: the upstream gets the message, not the pong.
      expect(await echo(ws, `after ping ${i}`)).toBe(`after ping ${i}`);
    }
    expect(pongsUpstream).toEqual([]);
    // The upstream's own pings, and the client's, are answered as before.
    const upstreamPonged = once(upstreamSide, 'pong');
    upstreamSide.ping('from the upstream');
    expect(String((await upstreamPonged)[0])).toBe('from the upstream');
    const clientPonged = once(ws, 'pong');
    ws.ping('from the client');
    expect(String((await clientPonged)[0])).toBe('from the client');
    ws.close(1000, 'done');
    expect(await closed(ws)).toEqual({ code: 1000, reason: 'done' });
  });
});

describe('a WebSocket frame larger than server.webSocketMaxFrame', () => {
  it('closes with 1009 a frame from the client, which the upstream never gets', async () => {
    const { gateway } = await gatewayWith({ webSocketMaxFrame: 1_024 });
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    const upstreamClosed = upstreamCloseCode();
    const received = upstream().received.length;
    expect(await echo(ws, 'k'.repeat(1_024))).toHaveLength(1_024);
    const ended = closed(ws);
    ws.send('k'.repeat(1_025));
    expect(await ended).toEqual({ code: 1009, reason: 'frame too big' });
    expect(await upstreamClosed).toBe(1009);
    expect(upstream().received.length).toBe(received + 1);
    await expect
      .poll(() => accessLines(gateway).find((line) => line.status === 101))
      .toMatchObject({ webSocket: 'protocol_error' });
  });

  it('closes with 1009 a frame from the upstream, which the client never gets', async () => {
    const { gateway } = await gatewayWith({ webSocketMaxFrame: 1_024 });
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    const messages: string[] = [];
    ws.on('message', (data) => messages.push(data.toString()));
    const upstreamClosed = upstreamCloseCode();
    const ended = closed(ws);
    upstream().sockets.at(-1)!.send('u'.repeat(2_000));
    expect(await upstreamClosed).toBe(1009);
    expect(await ended).toEqual({ code: 1009, reason: 'frame too big' });
    expect(messages).toEqual([]);
  });

  it('closes with 1009 by default a frame of more than 16 MiB, on a raw socket that never sends it whole', async () => {
    const { gateway } = await gatewayWith();
    const ws = await rawWebSocket(gateway.url, handshake('/pets/1', [authorization]));
    // A binary frame whose 64-bit length says 16 MiB + 1, then its mask key, and no payload.
    ws.socket.write(frame(0x82, 0xff, 0, 0, 0, 0, 0x01, 0, 0, 0x01, 1, 2, 3, 4));
    await ws.closed;
    expect(closeCodeOf(ws.received())).toBe(1009);
  });
});
