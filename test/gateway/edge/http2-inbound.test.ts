import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { curl, http2Fetch, http2Request, http2Session } from '../../helpers/http2-client.js';
import {
  frameType,
  headersFrame,
  openRawHttp2,
  requestFields,
  statusOf,
} from '../../helpers/http2-frames.js';
import { request } from '../../helpers/raw-http.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsApiId,
  petsConfig,
  startTestGateway,
  throttle,
  type TestGateway,
} from '../../helpers/test-gateway.js';
import { createTestCertificate, type TestCertificate } from '../../helpers/tls-cert.js';
import { startUpstream, type TestUpstream } from '../../helpers/upstream.js';

let upstream: TestUpstream;
let certificate: TestCertificate;
let gateway: TestGateway;
const auth = { authorization: basicAuth(devKey) };
const findByStatusId = '0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f';
const httpsUrl = () => `https://127.0.0.1:${gateway.running.ports.https}`;

beforeAll(async () => {
  upstream = await startUpstream();
  certificate = await createTestCertificate();
  gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, {
      tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
      accessLog: { flushMs: 0 },
      quotas: [
        {
          id: '7d1f6a52-0c9e-4b8e-9f3a-2e5d8c7b6a41',
          type: 'API',
          name: 'two a minute on findByStatus',
          restrictions: [throttle(2, 1, 'minute', { api: petsApiId, method: findByStatusId })],
        },
      ],
    }),
  );
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
  rmSync(certificate.dir, { recursive: true, force: true });
});

/** The protocol a TLS listener on `port` chooses by ALPN among `protocols`, or false for none. */
const chosen = (port: number, protocols: string[]) =>
  new Promise<string | false>((resolve, reject) => {
    const socket = tls.connect(
      { host: '127.0.0.1', port, ca: certificate.cert, ALPNProtocols: protocols },
      () => {
        resolve(socket.alpnProtocol ?? false);
        socket.end();
      },
    );
    socket.on('error', reject);
  });

describe('HTTP/2 with prior knowledge on the cleartext port', () => {
  it('recognises the connection preface sent one byte per TCP write, and answers its stream', async () => {
    const authority = new URL(gateway.url).host;
    const connection = await openRawHttp2(Number(new URL(gateway.url).port), { bytewise: true });
    try {
      connection.send(
        headersFrame(1, requestFields(authority, '/pets/1', [['authorization', auth.authorization]]), {
          endStream: true,
        }),
      );
      const answer = await connection.frame((received) => received.streamId === 1);
      expect([answer.type, statusOf(answer)]).toEqual([frameType.headers, 200]);
    } finally {
      connection.close();
    }
  });

  it('forwards a stream as one HTTP/1.1 request, without pseudo-header fields, Host the upstream own', async () => {
    const before = upstream.requests.length;
    const answer = await http2Fetch(gateway.url, { path: '/pets/1?x=1', headers: auth });
    expect(answer.status).toBe(200);
    expect(upstream.requests.length).toBe(before + 1);
    const seen = upstream.requests.at(-1)!;
    expect(seen).toMatchObject({ method: 'GET', url: '/pets/1?x=1' });
    expect(Object.keys(seen.headers).filter((name) => name.startsWith(':'))).toEqual([]);
    expect(seen.headers.host).toBe(`127.0.0.1:${upstream.port}`);
    expect(seen.headers['x-forwarded-proto']).toBe('http');
    expect(seen.headers['x-forwarded-host']).toBe(new URL(gateway.url).host);
    expect(answer.headers['x-request-id']).toEqual(expect.any(String));
  });

  it('keeps HTTP/1.1 on the same port', async () => {
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(res.status).toBe(200);
    await vi.waitFor(() => expect(accessLines(gateway).at(-1)).toMatchObject({ protocol: 'HTTP/1.1' }));
  });

  it('streams a request body that no content-length frames upstream, chunked', async () => {
    const session = await http2Session(gateway.url);
    try {
      const answer = await http2Request(session, {
        method: 'POST',
        path: '/pets',
        headers: { ...auth, 'content-type': 'application/json' },
        body: '{"name":"rex"}',
      });
      expect(answer.status).toBe(200);
      const seen = upstream.requests.at(-1)!;
      expect(seen.body).toBe('{"name":"rex"}');
      expect(seen.headers['transfer-encoding']).toBe('chunked');
    } finally {
      session.close();
    }
  });

  it('answers curl --http2-prior-knowledge', async () => {
    const out = await curl([
      '--http2-prior-knowledge',
      '--user',
      `${devKey}:`,
      '--write-out',
      '\n%{http_version} %{http_code}',
      `${gateway.url}/pets/7`,
    ]);
    expect(out.split('\n').at(-1)).toBe('2 200');
    expect(JSON.parse(out.split('\n')[0]!)).toMatchObject({ url: '/pets/7' });
  });

  it('refuses a stream without credentials with 401 and its challenge, and logs it', async () => {
    const before = upstream.requests.length;
    const answer = await http2Fetch(gateway.url, { path: '/pets/1' });
    expect(answer.status).toBe(401);
    expect(answer.headers['www-authenticate']).toMatch(/^Basic/);
    expect(JSON.parse(answer.body)).toMatchObject({ id: 'com.vendor.api.unauthorized' });
    expect(upstream.requests.length).toBe(before);
    // The line is written once the stream has closed, which may be after its answer reached the client.
    await vi.waitFor(() =>
      expect(accessLines(gateway).at(-1)).toMatchObject({
        verb: 'GET',
        path: '/pets/1',
        protocol: 'HTTP/2',
        status: 401,
      }),
    );
  });

  it('answers 429 with the RateLimit fields and Retry-After once a quota is spent', async () => {
    const session = await http2Session(gateway.url);
    try {
      const ask = () => http2Request(session, { path: '/pets/findByStatus', headers: auth });
      expect((await ask()).status).toBe(200);
      expect((await ask()).status).toBe(200);
      const refused = await ask();
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toMatch(/^\d+$/);
      expect(refused.headers.ratelimit).toMatch(/r=0/);
      expect(refused.headers['ratelimit-policy']).toBeDefined();
      await vi.waitFor(() =>
        expect(accessLines(gateway).at(-1)).toMatchObject({
          status: 429,
          quota: 'rejected',
          protocol: 'HTTP/2',
        }),
      );
      const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
      expect(metrics).toMatch(
        /^quotagate_requests_total\{api="Pet Store",method="findByStatus",status="429"\} 1$/m,
      );
      expect(metrics).toMatch(/^quotagate_added_latency_seconds_count\{part="request"\} [1-9]/m);
    } finally {
      session.close();
    }
  });
});

describe('HTTP/2 by ALPN on the TLS listener', () => {
  it('offers h2 and http/1.1, in that order', async () => {
    expect(await chosen(gateway.running.ports.https!, ['h2', 'http/1.1'])).toBe('h2');
    expect(await chosen(gateway.running.ports.https!, ['http/1.1'])).toBe('http/1.1');
  });

  it('forwards a stream over h2, the upstream told it came over https', async () => {
    const answer = await http2Fetch(httpsUrl(), { path: '/pets/2', headers: auth, ca: certificate.cert });
    expect(answer.status).toBe(200);
    expect(upstream.requests.at(-1)!.headers['x-forwarded-proto']).toBe('https');
  });

  it('answers curl --http2 over TLS, and HTTP/1.1 clients as before', async () => {
    const out = await curl([
      '--http2',
      '--cacert',
      certificate.certFile,
      '--user',
      `${devKey}:`,
      '--output',
      '/dev/null',
      '--write-out',
      '%{http_version} %{http_code}',
      `${httpsUrl()}/pets/3`,
    ]);
    expect(out).toBe('2 200');
    const status = await new Promise<number>((resolve, reject) => {
      https
        .get(`${httpsUrl()}/pets/3`, { ca: certificate.cert, headers: auth }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on('error', reject);
    });
    expect(status).toBe(200);
  });
});

describe('http2: false', () => {
  it('keeps the listeners HTTP/1.1 only', async () => {
    const plain = await startTestGateway(
      petsConfig(`${upstream.url}/pets`, {
        http2: false,
        tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
      }),
    );
    try {
      const answer = await new Promise<string>((resolve) => {
        const socket = net.connect(plain.running.ports.http!, '127.0.0.1');
        let received = '';
        socket.on('data', (chunk) => (received += chunk.toString('latin1')));
        socket.on('close', () => resolve(received));
        socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
      });
      expect(answer).toMatch(/^HTTP\/1\.1 400/);
      expect(await chosen(plain.running.ports.https!, ['h2', 'http/1.1'])).toBe('http/1.1');
    } finally {
      await plain.close();
    }
  });
});
