import http, { type IncomingHttpHeaders } from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import { once } from 'node:events';
import { createProxyServer } from 'http-proxy-3';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { handshake } from '../../helpers/websockets.js';
import { followWebSocketOpenings } from '../../../src/upstream/websocket/relay.js';

const defer = cleanupAfterEach();

/** An unmasked text frame, as an upstream sends one (RFC 6455 §5.2). */
const serverText = (text: string) => Buffer.concat([Buffer.from([0x81, text.length]), Buffer.from(text)]);
/** A masked text frame, as a client sends one (the mask key is zero: the payload reads as sent). */
const clientText = (text: string) =>
  Buffer.concat([Buffer.from([0x81, 0x80 | text.length, 0, 0, 0, 0]), Buffer.from(text)]);

/** Listens on 127.0.0.1:0 until the test ends; the sockets it upgraded are destroyed then too. */
async function listening(server: http.Server): Promise<number> {
  const upgraded: Socket[] = [];
  server.on('upgrade', (_req, socket: Socket) => upgraded.push(socket));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  defer(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of upgraded) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}

/**
 * An upstream that answers every upgrade with a 101 and `early` in one write, and records the fields
 * and the bytes it received.
 */
async function speakingFirstUpstream(early: Buffer) {
  const seen = { headers: {} as IncomingHttpHeaders, bytes: Buffer.alloc(0) as Buffer };
  const server = http.createServer();
  server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
    seen.headers = req.headers;
    seen.bytes = head;
    socket.on('data', (chunk: Buffer) => {
      seen.bytes = Buffer.concat([seen.bytes, chunk]);
    });
    const answer = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n';
    socket.write(Buffer.concat([Buffer.from(answer, 'latin1'), early]));
  });
  return { port: await listening(server), seen };
}

describe('http-proxy-3 as the gateway relies on it to open a WebSocket (websocket/relay.ts)', () => {
  it('hands over both sockets unpiped and paused, before any byte flowed, with the 101 fields the gateway set', async () => {
    const fromUpstream = serverText('welcome');
    const fromClient = clientText('hello');
    const upstream = await speakingFirstUpstream(fromUpstream);
    const proxy = createProxyServer({ target: `http://127.0.0.1:${upstream.port}`, xfwd: false });
    proxy.on('error', () => undefined);
    const steps: string[] = [];
    const atOpen: Record<string, unknown> = {};
    const readFirst: Buffer[] = [];
    const open = followWebSocketOpenings(proxy, {
      requested: (proxyReq) => steps.push(`requested, sent: ${proxyReq.headersSent}`),
      switching: (_req, proxyRes) => {
        steps.push('switching');
        proxyRes.headers['x-set-by'] = 'gateway';
      },
      opened: (_req, client, upstreamSocket) => {
        steps.push('opened');
        Object.assign(atOpen, {
          waitingInUpstream: upstreamSocket.readableLength,
          waitingInClient: client.readableLength,
          upstreamReaders: upstreamSocket.listenerCount('data'),
          clientReaders: client.listenerCount('data'),
          paused: upstreamSocket.isPaused() && client.isPaused(),
        });
        upstreamSocket.on('data', (chunk: Buffer) => readFirst.push(chunk));
        upstreamSocket.pipe(client).pipe(upstreamSocket);
      },
      failed: (error) => steps.push(`failed: ${error.message}`),
    });
    const front = http.createServer();
    front.on('upgrade', (req: http.IncomingMessage, _socket: Socket, head: Buffer) => {
      open(req, head, { ...req.headers, 'x-sent-upstream': 'instead' });
      steps.push(`client's fields kept: ${req.headers['x-sent-upstream'] === undefined}`);
    });
    const client = net.connect(await listening(front), '127.0.0.1');
    defer(() => void client.destroy());
    let received = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
    });
    client.write(Buffer.concat([Buffer.from(handshake('/chat'), 'latin1'), fromClient]));

    await expect.poll(() => received.subarray(received.indexOf('\r\n\r\n') + 4)).toEqual(fromUpstream);
    await expect.poll(() => upstream.seen.bytes).toEqual(fromClient);
    expect(steps).toEqual(['requested, sent: false', "client's fields kept: true", 'switching', 'opened']);
    expect(received.toString('latin1')).toMatch(
      /^HTTP\/1\.1 101 Switching Protocols\r\n[^]*x-set-by: gateway\r\n/,
    );
    expect(upstream.seen.headers['x-sent-upstream']).toBe('instead');
    // Nothing had flowed at 'open': each side's early bytes still waited, paused, with no reader.
    expect(atOpen).toEqual({
      waitingInUpstream: fromUpstream.length,
      waitingInClient: fromClient.length,
      upstreamReaders: 0,
      clientReaders: 0,
      paused: true,
    });
    expect(Buffer.concat(readFirst)).toEqual(fromUpstream);
  });

  it('tells a failed opening with the client request', async () => {
    const proxy = createProxyServer({ target: 'http://127.0.0.1:1', xfwd: false });
    proxy.on('error', () => undefined);
    const failures: string[] = [];
    const open = followWebSocketOpenings(proxy, {
      requested: () => undefined,
      switching: () => undefined,
      opened: () => undefined,
      failed: (error, req) => failures.push(`${(error as NodeJS.ErrnoException).code} ${req.url}`),
    });
    const front = http.createServer();
    front.on('upgrade', (req: http.IncomingMessage, _socket: Socket, head: Buffer) =>
      open(req, head, req.headers),
    );
    const client = net.connect(await listening(front), '127.0.0.1');
    defer(() => void client.destroy());
    client.write(handshake('/chat'));
    await expect.poll(() => failures).toEqual(['ECONNREFUSED /chat']);
  });
});
