import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import {
  closeCodeOf,
  frame,
  handshake,
  rawWebSocket,
  startWebSocketUpstream,
  type WebSocketUpstream,
} from '../helpers/websockets.js';

/**
 * WebSocket openings and frames no real client sends, on raw sockets: each is refused before the
 * upstream sees it, or cut off once it breaks RFC 6455, and none leaves a connection on which a second
 * request reaches the upstream unauthenticated.
 */

let upstream: WebSocketUpstream;
let gateway: TestGateway;
const authorization = `Authorization: ${basicAuth(devKey)}`;

beforeAll(async () => {
  upstream = await startWebSocketUpstream();
  const [api] = petsConfig(upstream.url).apis as Array<Record<string, unknown>>;
  gateway = await startTestGateway(
    petsConfig(upstream.url, {
      // `/pets/refused` reaches the upstream, which refuses the upgrade.
      apis: [{ ...api, passUndeclared: true }],
      server: { headersTimeout: 500, requestTimeout: 1_500, connectionsCheckingInterval: 100 },
    }),
  );
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

/** The upgrades and plain requests the upstream has seen so far. */
const seen = () => upstream.upgrades.length + upstream.plain.length;

describe('malformed WebSocket openings', () => {
  it('refuses a second Upgrade line with 400 before the upstream sees anything', async () => {
    const before = seen();
    const answer = await rawExchange(
      gateway.url,
      handshake('/pets/1', [authorization, 'Upgrade: websocket']),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('Upgrade must name websocket once, alone');
    expect(answer).toMatch(/\r\nConnection: close\r\n/i);
    expect(seen()).toBe(before);
  });

  it('answers an Upgrade without `Connection: upgrade` as a plain request, sent upstream without Upgrade', async () => {
    const answer = await rawExchange(
      gateway.url,
      `GET /pets/1 HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nSec-WebSocket-Key: x\r\n${authorization}\r\nConnection: close\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(/plain$/);
    expect(upstream.plain.at(-1)!.headers.upgrade).toBeUndefined();
  });

  it('refuses an upgrade on POST with 400', async () => {
    const before = seen();
    const answer = await rawExchange(
      gateway.url,
      handshake('/pets/', [authorization]).replace(/^GET/, 'POST'),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('a WebSocket opens with a GET');
    expect(seen()).toBe(before);
  });

  it('refuses an opening over HTTP/1.0 with 400', async () => {
    const before = seen();
    const answer = await rawExchange(
      gateway.url,
      handshake('/pets/1', [authorization]).replace('HTTP/1.1', 'HTTP/1.0'),
    );
    expect(answer).toMatch(/^HTTP\/1\.[01] 400 /);
    expect(answer).toContain('a WebSocket opens over HTTP/1.1');
    expect(seen()).toBe(before);
  });

  it('refuses a Sec-WebSocket-Key that is not 16 bytes in base64 with 400', async () => {
    const answer = await rawExchange(
      gateway.url,
      handshake('/pets/1', [authorization]).replace(
        /Sec-WebSocket-Key: .*\r\n/,
        'Sec-WebSocket-Key: short==\r\n',
      ),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('Sec-WebSocket-Key must be 16 bytes in base64');
  });

  it('refuses another Sec-WebSocket-Version with 400 naming version 13 (RFC 6455 §4.4)', async () => {
    const answer = await rawExchange(
      gateway.url,
      handshake('/pets/1', [authorization]).replace('Sec-WebSocket-Version: 13', 'Sec-WebSocket-Version: 8'),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/\r\nsec-websocket-version: 13\r\n/i);
  });

  it('never forwards an opening the client does not finish: headersTimeout cuts it off', async () => {
    const before = seen();
    const port = Number(new URL(gateway.url).port);
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(handshake('/pets/1', [authorization]).slice(0, -4));
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(seen()).toBe(before);
  });
});

describe('smuggling through a WebSocket opening', () => {
  it('answers a refused upgrade once and closes: a request behind it never reaches the upstream', async () => {
    const before = seen();
    const answer = await rawExchange(
      gateway.url,
      `${handshake('/pets/1')}GET /pets/2 HTTP/1.1\r\nHost: gw\r\n${authorization}\r\n\r\n`,
    );
    expect(answer.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(seen()).toBe(before);
  });

  it('relays an upgrade the upstream refuses, then closes: no tunnel is left for a second request', async () => {
    const upgrades = upstream.upgrades.length;
    const plain = upstream.plain.length;
    const answer = await rawExchange(
      gateway.url,
      `${handshake('/pets/refused', [authorization])}GET /internal HTTP/1.1\r\nHost: gw\r\n\r\n`,
    );
    expect(answer.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(upstream.upgrades.length).toBe(upgrades + 1);
    expect(upstream.plain.length).toBe(plain);
  });

  it('takes HTTP sent after a 101 for frames: unmasked, it closes the connection with 1002', async () => {
    const plain = upstream.plain.length;
    const ws = await rawWebSocket(gateway.url, handshake('/pets/1', [authorization]));
    ws.socket.write(`GET /internal HTTP/1.1\r\nHost: gw\r\n\r\n`);
    await ws.closed;
    expect(closeCodeOf(ws.received())).toBe(1002);
    expect(upstream.plain.length).toBe(plain);
  });
});

describe('frames a relay must not pass', () => {
  it('closes with 1002 on a 64-bit length with its top bit set, and cuts off the upstream', async () => {
    const ws = await rawWebSocket(gateway.url, handshake('/pets/1', [authorization]));
    const upstreamSide = upstream.sockets.at(-1)!;
    const upstreamClosed = new Promise<void>((resolve) => upstreamSide.once('close', () => resolve()));
    const received = upstream.received.length;
    ws.socket.write(frame(0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4, 0));
    await ws.closed;
    expect(closeCodeOf(ws.received())).toBe(1002);
    await upstreamClosed;
    expect(upstream.received.length).toBe(received);
  });

  it('closes with 1009 on a frame longer than the relay can count (2^53 bytes)', async () => {
    const ws = await rawWebSocket(gateway.url, handshake('/pets/1', [authorization]));
    ws.socket.write(frame(0x82, 0xff, 0x00, 0x20, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4));
    await ws.closed;
    expect(closeCodeOf(ws.received())).toBe(1009);
  });

  it('closes with 1002 on a control frame of more than 125 bytes', async () => {
    const ws = await rawWebSocket(gateway.url, handshake('/pets/1', [authorization]));
    ws.socket.write(frame(0x89, 0xfe, 0x00, 0xc8, 1, 2, 3, 4));
    await ws.closed;
    expect(closeCodeOf(ws.received())).toBe(1002);
  });

  it('relays a large masked frame split across writes whole', async () => {
    const ws = await rawWebSocket(gateway.url, handshake('/pets/1', [authorization]));
    const payload = Buffer.alloc(70_000, 0x61);
    const head = frame(0x81, 0xff, 0, 0, 0, 0, 0, 0x01, 0x11, 0x70, 0, 0, 0, 0);
    ws.socket.write(Buffer.concat([head, payload.subarray(0, 30_000)]));
    ws.socket.write(payload.subarray(30_000));
    await expect.poll(() => upstream.received.at(-1)?.length).toBe(70_000);
    ws.socket.destroy();
  });
});
