import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange, request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

let upstream: TestUpstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  gateway = await startTestGateway(
    petsConfig(upstream.url, {
      server: {
        headersTimeout: 500,
        requestTimeout: 1500,
        connectionsCheckingInterval: 100,
        maxHeaderSize: 2048,
      },
    }),
  );
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

describe('data-plane server hardening', () => {
  it('cuts off a client that sends its headers too slowly (slowloris) within headersTimeout', async () => {
    const port = Number(new URL(gateway.url).port);
    const socket = net.connect(port, '127.0.0.1');
    const started = Date.now();
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - started)));
    socket.on('error', () => undefined);
    socket.write('GET /pets/1 HTTP/1.1\r\nHost: gw\r\n');
    const drip = setInterval(() => socket.writable && socket.write('X-Slow: 1\r\n'), 100);
    const elapsed = await closed;
    clearInterval(drip);
    expect(elapsed).toBeGreaterThanOrEqual(400);
    expect(elapsed).toBeLessThan(1500);
  });

  it('cuts off a client that sends its body too slowly within requestTimeout', async () => {
    const started = Date.now();
    const response = await rawExchange(
      gateway.url,
      `POST /pets HTTP/1.1\r\nHost: gw\r\nAuthorization: ${basicAuth(devKey)}\r\nContent-Length: 100\r\n\r\nabc`,
      5_000,
    );
    expect(Date.now() - started).toBeLessThan(3000);
    expect(response).toMatch(/^HTTP\/1\.1 408|^$/);
  });

  it('refuses headers larger than maxHeaderSize with 431', async () => {
    const res = await rawExchange(
      gateway.url,
      `GET /pets/1 HTTP/1.1\r\nHost: gw\r\nX-Big: ${'a'.repeat(4096)}\r\n\r\n`,
    );
    expect(res).toMatch(/^HTTP\/1\.1 431/);
  });

  it('still serves well-behaved clients', async () => {
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { authorization: basicAuth(devKey) },
    });
    expect(res.status).toBe(200);
  });
});
