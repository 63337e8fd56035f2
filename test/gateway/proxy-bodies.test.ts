import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { rawExchange } from '../helpers/raw-http.js';
import { auth, nextTick, useProxyParts } from '../helpers/proxy-parts.js';
import { accessLines } from '../helpers/test-gateway.js';

const { gatewayFor, upstreamWith } = useProxyParts();

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
