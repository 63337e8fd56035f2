import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange, request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { createTestCertificate } from '../helpers/tls-cert.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const auth = { authorization: basicAuth(devKey) };
const stops: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

async function gatewayFor(
  upstreamUrl: string,
  overrides: Record<string, unknown> = {},
): Promise<TestGateway> {
  const gateway = await startTestGateway(petsConfig(upstreamUrl, overrides));
  stops.push(() => gateway.close());
  return gateway;
}

async function upstreamWith(handler?: Parameters<typeof startUpstream>[0]): Promise<TestUpstream> {
  const upstream = await startUpstream(handler);
  stops.push(() => upstream.close());
  return upstream;
}

const accessLines = (gateway: TestGateway) => gateway.logs.filter((line) => line.msg === 'request');
const nextTick = () => new Promise((resolve) => setImmediate(resolve));

describe('header hygiene', () => {
  let upstream: TestUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    upstream = await startUpstream((_req, res) => {
      res.writeHead(200, {
        'content-type': 'text/plain',
        connection: 'x-upstream-secret',
        'x-upstream-secret': 'internal',
        'keep-alive': 'timeout=5',
        'proxy-authenticate': 'Basic',
        trailer: 'x-checksum',
        'x-request-id': 'from-upstream',
        'x-kept': 'yes',
      });
      res.end('ok');
    });
    gateway = await startTestGateway(petsConfig(upstream.url));
  });

  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it('strips hop-by-hop request headers, including those named in Connection', async () => {
    await request(gateway.url, {
      path: '/pets/1',
      headers: {
        ...auth,
        connection: 'keep-alive, x-hop',
        'x-hop': 'drop me',
        'keep-alive': 'timeout=1',
        te: 'trailers',
        'proxy-authorization': 'Basic abc',
        upgrade: 'h2c',
        'x-end-to-end': 'keep me',
      },
    });
    const seen = upstream.requests.at(-1)!.headers;
    for (const name of ['x-hop', 'keep-alive', 'te', 'proxy-authorization', 'upgrade']) {
      expect(seen[name], name).toBeUndefined();
    }
    expect(seen['x-end-to-end']).toBe('keep me');
  });

  it('strips hop-by-hop response headers, including those named in Connection', async () => {
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(res.body).toBe('ok');
    expect(res.headers['x-upstream-secret']).toBeUndefined();
    expect(res.headers['proxy-authenticate']).toBeUndefined();
    expect(res.headers.trailer).toBeUndefined();
    expect(res.headers['x-kept']).toBe('yes');
  });

  it('never forwards Authorization or APIKey by default', async () => {
    await request(gateway.url, { path: '/pets/1', headers: { ...auth, apikey: 'some-key' } });
    const seen = upstream.requests.at(-1)!.headers;
    expect(seen.authorization).toBeUndefined();
    expect(seen.apikey).toBeUndefined();
  });

  it('replaces client-sent X-Forwarded-* with values from the socket', async () => {
    await request(gateway.url, {
      path: '/pets/1',
      headers: {
        ...auth,
        'x-forwarded-for': '6.6.6.6',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'evil.test',
        forwarded: 'for=6.6.6.6',
      },
    });
    const seen = upstream.requests.at(-1)!.headers;
    expect(seen['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen['x-forwarded-proto']).toBe('http');
    expect(seen['x-forwarded-host']).toBe(new URL(gateway.url).host);
    expect(seen.forwarded).toBeUndefined();
    expect(seen.host).toBe(new URL(upstream.url).host);
  });

  it('keeps a valid X-Request-Id, sends it upstream and echoes it over the upstream one', async () => {
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { ...auth, 'x-request-id': 'abc-123' },
    });
    expect(res.headers['x-request-id']).toBe('abc-123');
    expect(upstream.requests.at(-1)!.headers['x-request-id']).toBe('abc-123');
  });

  it('replaces an unusable X-Request-Id with a generated one', async () => {
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { ...auth, 'x-request-id': 'not a token' },
    });
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(upstream.requests.at(-1)!.headers['x-request-id']).toBe(res.headers['x-request-id']);
  });

  it('reuses upstream connections (keep-alive agent)', async () => {
    const before = upstream.requests.length;
    for (let i = 0; i < 3; i += 1) await request(gateway.url, { path: '/pets/1', headers: auth });
    const sockets = new Set(upstream.requests.slice(before).map((seen) => seen.socket));
    expect(sockets.size).toBe(1);
  });
});

describe('forwarding options', () => {
  it('extends X-Forwarded-For from a trusted proxy and keeps its proto and host', async () => {
    const upstream = await upstreamWith();
    const gateway = await gatewayFor(upstream.url, { trustProxy: ['127.0.0.0/8'] });
    await request(gateway.url, {
      path: '/pets/1',
      headers: {
        ...auth,
        'x-forwarded-for': '203.0.113.9',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'api.test',
      },
    });
    const seen = upstream.requests.at(-1)!.headers;
    expect(seen['x-forwarded-for']).toBe('203.0.113.9, 127.0.0.1');
    expect(seen['x-forwarded-proto']).toBe('https');
    expect(seen['x-forwarded-host']).toBe('api.test');
  });

  it('forwards credentials when forwardCredentials is true', async () => {
    const upstream = await upstreamWith();
    const gateway = await gatewayFor(upstream.url, { forwardCredentials: true });
    await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(upstream.requests.at(-1)!.headers.authorization).toBe(auth.authorization);
  });
});

describe('bodies', () => {
  it('streams a chunked request body and counts bytes both ways in the access log', async () => {
    const upstream = await upstreamWith();
    const gateway = await gatewayFor(upstream.url);
    const payload = 'x'.repeat(100_000);
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        `${gateway.url}/pets`,
        { method: 'POST', headers: { ...auth } },
        (response) => {
          let body = '';
          response.on('data', (chunk) => (body += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.write(payload.slice(0, 50_000));
      setImmediate(() => req.end(payload.slice(50_000)));
    });
    expect(res.status).toBe(200);
    expect(upstream.requests.at(-1)!.body).toBe(payload);
    expect(upstream.requests.at(-1)!.headers['transfer-encoding']).toBe('chunked');
    await nextTick();
    expect(accessLines(gateway).at(-1)).toMatchObject({
      status: 200,
      bytesIn: 100_000,
      bytesOut: Buffer.byteLength(res.body),
      outcome: 'completed',
    });
  });
  it('frames a request that declares no body as none: a GET as it came, a POST with Content-Length: 0', async () => {
    const upstream = await upstreamWith();
    const gateway = await gatewayFor(upstream.url);
    const host = new URL(gateway.url).host;
    for (const verb of ['GET /pets/1', 'POST /pets']) {
      const head = `${verb} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${auth.authorization}\r\nConnection: close\r\n\r\n`;
      expect(await rawExchange(gateway.url, head)).toMatch(/^HTTP\/1\.1 200 /);
    }
    const [get, post] = upstream.requests;
    expect(get!.headers).not.toHaveProperty('content-length');
    expect(get!.headers).not.toHaveProperty('transfer-encoding');
    expect(post!.headers['content-length']).toBe('0');
    expect(post!.headers).not.toHaveProperty('transfer-encoding');
  });

  it('streams a large response to a slow reader whole, holding the upstream back meanwhile', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'q');
    const chunks = 1024; // 64 MiB: far more than the socket buffers on the way hold
    let upstreamEnded = false;
    let endedBeforeReading = true;
    const upstream = await upstreamWith((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let sent = 0;
      const more = () => {
        while (sent < chunks) {
          sent += 1;
          if (!res.write(chunk)) {
            res.once('drain', more);
            return;
          }
        }
        upstreamEnded = true;
        res.end();
      };
      more();
    });
    const gateway = await gatewayFor(upstream.url);
    const received = await new Promise<number>((resolve, reject) => {
      http
        .get(`${gateway.url}/pets/1`, { headers: auth }, (res) => {
          let bytes = 0;
          res.pause();
          // Reads nothing for a while, so the gateway must stop reading the upstream rather than buffer.
          setTimeout(() => {
            endedBeforeReading = upstreamEnded;
            res.on('data', (data: Buffer) => {
              for (const byte of data) if (byte !== 0x71) reject(new Error('corrupted byte'));
              bytes += data.length;
            });
            res.on('end', () => resolve(bytes));
            res.resume();
          }, 200);
        })
        .on('error', reject);
    });
    expect(received).toBe(chunk.length * chunks);
    expect(endedBeforeReading).toBe(false);
    await nextTick();
    expect(accessLines(gateway).at(-1)).toMatchObject({
      bytesOut: chunk.length * chunks,
      outcome: 'completed',
    });
  });
});

describe('answers', () => {
  it('relays each line of a field the upstream repeats, as it sent them', async () => {
    const upstream = await upstreamWith((_req, res) => {
      res.setHeader('set-cookie', ['a=1; Path=/', 'b=2; Path=/']);
      res.setHeader('x-repeated', ['one', 'two']);
      res.end('ok');
    });
    const gateway = await gatewayFor(upstream.url);
    const head = await rawExchange(
      gateway.url,
      `GET /pets/1 HTTP/1.1\r\nHost: ${new URL(gateway.url).host}\r\nAuthorization: ${auth.authorization}\r\nConnection: close\r\n\r\n`,
    );
    const lines = head.split('\r\n');
    expect(lines.filter((line) => /^set-cookie:/i.test(line))).toEqual([
      'set-cookie: a=1; Path=/',
      'set-cookie: b=2; Path=/',
    ]);
    expect(lines.filter((line) => /^x-repeated:/i.test(line))).toEqual([
      'x-repeated: one',
      'x-repeated: two',
    ]);
  });
});

describe('upstream failures', () => {
  it('answers 502 JSON within a second when the upstream refuses connections', async () => {
    const closed = await startUpstream();
    await closed.close();
    const gateway = await gatewayFor(closed.url);
    const started = Date.now();
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(502);
    expect(JSON.parse(res.body)).toEqual({
      id: 'com.vendor.api.bad_gateway',
      message: 'Bad Gateway',
      success: false,
    });
    expect(res.body).not.toContain('127.0.0.1');
    expect(res.body).not.toContain('ECONNREFUSED');
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/quotagate_upstream_errors_total\{api="[^"]+",outcome="unreachable"\} 1/);
    await nextTick();
    expect(accessLines(gateway).at(-1)).toMatchObject({
      status: 502,
      outcome: 'unreachable',
      bytesOut: Buffer.byteLength(res.body),
    });
  });

  it('answers 504 when the upstream does not respond within proxyTimeout', async () => {
    const hung = await upstreamWith(() => undefined);
    const gateway = await gatewayFor(hung.url, { proxyTimeout: 300 });
    const started = Date.now();
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    const elapsed = Date.now() - started;
    expect(res.status).toBe(504);
    expect(JSON.parse(res.body).id).toBe('com.vendor.api.gateway_timeout');
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(2000);
  });

  it('puts a proxyTimeout changed by a reload in force for the next exchange, on a kept-alive connection', async () => {
    let hang = false;
    const upstream = await upstreamWith((_req, res) => {
      if (!hang) res.end('ok');
    });
    const gateway = await gatewayFor(upstream.url, { proxyTimeout: 30_000 });
    expect((await request(gateway.url, { path: '/pets/1', headers: auth })).status).toBe(200);
    const outcome = await gateway.reloadWith(petsConfig(upstream.url, { proxyTimeout: 200 }));
    expect(outcome).toMatchObject({ applied: true });
    hang = true;
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(res.status).toBe(504);
    // The same pooled upstream connection carried both exchanges.
    expect(new Set(upstream.requests.map((seen) => seen.socket)).size).toBe(1);
  });

  it('holds a slow upload against the client, not the upstream: proxyTimeout runs once the body is sent', async () => {
    let answer = true;
    const upstream = await upstreamWith((_req, res) => {
      if (answer) res.end('ok');
    });
    const gateway = await gatewayFor(upstream.url, { proxyTimeout: 300 });
    const post = () =>
      new Promise<{ status: number; afterUploadMs: number }>((resolve, reject) => {
        let uploadedAt = 0;
        const req = http.request(
          `${gateway.url}/pets`,
          { method: 'POST', headers: { ...auth, 'content-length': '4' } },
          (res) => {
            res.resume();
            resolve({ status: res.statusCode ?? 0, afterUploadMs: Date.now() - uploadedAt });
          },
        );
        req.on('error', reject);
        req.write('ab');
        // The rest comes after more than proxyTimeout.
        setTimeout(() => {
          uploadedAt = Date.now();
          req.end('cd');
        }, 800);
      });
    expect((await post()).status).toBe(200);
    expect(upstream.requests.at(-1)!.body).toBe('abcd');
    answer = false;
    const unanswered = await post();
    expect(unanswered.status).toBe(504);
    expect(unanswered.afterUploadMs).toBeGreaterThanOrEqual(250);
  });

  it('verifies the certificate of an HTTPS upstream: one it cannot trust is a 502, never a plain exchange', async () => {
    const certificate = await createTestCertificate();
    const server = https.createServer(
      { key: readFileSync(certificate.keyFile), cert: certificate.cert },
      (_req, res) => res.end('should not be reached'),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    stops.push(async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(certificate.dir, { recursive: true, force: true });
    });
    const { port } = server.address() as net.AddressInfo;
    const gateway = await gatewayFor(`https://127.0.0.1:${port}`);
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(res.status).toBe(502);
    expect(accessLines(gateway).at(-1)).toMatchObject({ status: 502, outcome: 'unreachable' });
  });

  it('closes the client connection promptly when the upstream resets mid-response', async () => {
    const resetting = await upstreamWith((_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('partial');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const gateway = await gatewayFor(resetting.url);
    const started = Date.now();
    const outcome = await new Promise<string>((resolve) => {
      const req = http.get(`${gateway.url}/pets/1`, { headers: auth }, (res) => {
        res.on('data', () => undefined);
        res.on('end', () => resolve('ended'));
        res.on('error', () => resolve('broken'));
        res.on('aborted', () => resolve('broken'));
      });
      req.on('error', () => resolve('broken'));
    });
    expect(outcome).toBe('broken');
    expect(Date.now() - started).toBeLessThan(2000);
    await nextTick();
    expect(accessLines(gateway).at(-1)).toMatchObject({ status: 200, outcome: 'reset' });
  });

  it('destroys the upstream request when the client aborts', async () => {
    let upstreamClosed!: () => void;
    const closedUpstream = new Promise<void>((resolve) => (upstreamClosed = resolve));
    let arrived!: () => void;
    const requestArrived = new Promise<void>((resolve) => (arrived = resolve));
    const slow = await upstreamWith((req) => {
      req.socket.on('close', upstreamClosed);
      arrived();
    });
    const gateway = await gatewayFor(slow.url);
    const client = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
    client.write(`GET /pets/1 HTTP/1.1\r\nHost: gw\r\nAuthorization: ${auth.authorization}\r\n\r\n`);
    await requestArrived;
    client.destroy();
    await closedUpstream;
    await nextTick();
    expect(accessLines(gateway).at(-1)).toMatchObject({ outcome: 'client_aborted' });
  });
});
