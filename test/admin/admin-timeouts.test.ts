import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange } from '../helpers/raw-http.js';
import {
  adminUser,
  petsConfig,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';

let gateway: TestGateway;

beforeAll(async () => {
  gateway = await startTestGateway(
    petsConfig('http://127.0.0.1:9', {
      server: {
        headersTimeout: 300,
        requestTimeout: 600,
        keepAliveTimeout: 200,
        connectionsCheckingInterval: 50,
      },
    }),
  );
});
afterAll(() => gateway.close());

/** Opens a connection to the admin port, writes `first`, and resolves with the ms until the server closes it. */
function closedAfter(first: string, drip?: string): Promise<{ elapsed: number; received: string }> {
  const socket = net.connect(Number(new URL(gateway.adminUrl).port), '127.0.0.1');
  const started = Date.now();
  let received = '';
  let timer: NodeJS.Timeout | undefined;
  socket.on('data', (chunk) => (received += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  socket.write(first);
  if (drip) timer = setInterval(() => socket.writable && socket.write(drip), 50);
  return new Promise((resolve, reject) => {
    const guard = setTimeout(() => {
      clearInterval(timer);
      socket.destroy();
      reject(new Error('the admin port kept the connection open for 5 s'));
    }, 5_000);
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(guard);
      resolve({ elapsed: Date.now() - started, received });
    });
  });
}

describe('admin listener timeouts (the data plane server settings)', () => {
  it('cuts off a client that sends its headers too slowly within headersTimeout', async () => {
    const { elapsed, received } = await closedAfter(
      'GET /healthz HTTP/1.1\r\nHost: localhost\r\n',
      'X-Slow: 1\r\n',
    );
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(2_000);
    expect(received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(received.toLowerCase()).toContain('x-content-type-options: nosniff');
    expect(received.slice(received.indexOf('\r\n\r\n') + 4)).toBe(
      JSON.stringify({ errors: [{ code: 408, message: 'Request Timeout' }] }),
    );
  });

  it('cuts off a client that never finishes its headers within headersTimeout', async () => {
    const { elapsed } = await closedAfter('GET /api/portal/v1.3/quotas HTTP/1.1\r\nHost: localhost\r\n');
    expect(elapsed).toBeLessThan(2_000);
  });

  it('cuts off a client that sends its body too slowly within requestTimeout', async () => {
    const { elapsed, received } = await closedAfter(
      `POST /api/portal/v1.3/quotas HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${userAuth(adminUser)}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
      ' ',
    );
    expect(elapsed).toBeGreaterThanOrEqual(500);
    expect(elapsed).toBeLessThan(3_000);
    expect(received).toMatch(/^$|^HTTP\/1\.1 408/);
  });

  it('closes an idle keep-alive connection after keepAliveTimeout', async () => {
    const { elapsed, received } = await closedAfter('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(received).toMatch(/^HTTP\/1\.1 200/);
    expect(received.toLowerCase()).toContain('keep-alive: timeout=');
    expect(elapsed).toBeLessThan(2_000);
  });

  it('still serves well-behaved clients', async () => {
    const raw = await rawExchange(
      gateway.adminUrl,
      'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
    );
    expect(raw).toMatch(/^HTTP\/1\.1 200/);
  });
});
