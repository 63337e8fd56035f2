import { rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { http2Fetch, http2Request, http2Session } from '../../helpers/http2-client.js';
import { basicAuth, devKey, petsConfig, startTestGateway } from '../../helpers/test-gateway.js';
import { createTestCertificate, type TestCertificate } from '../../helpers/tls-cert.js';
import { startUpstream } from '../../helpers/upstream.js';

const defer = cleanupAfterEach();
const auth = { authorization: basicAuth(devKey) };

describe('Expect: 100-continue on an HTTP/2 stream', () => {
  it('refuses a stream without credentials before inviting its body, and invites the body of one admitted', async () => {
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const gateway = await startTestGateway(petsConfig(`${upstream.url}/pets`));
    defer(() => gateway.close());
    const session = await http2Session(gateway.url);
    defer(() => session.close());

    const ask = (headers: Record<string, string>) =>
      new Promise<{ continued: boolean; status: number }>((resolve, reject) => {
        let continued = false;
        const stream = session.request({
          ':method': 'POST',
          ':path': '/pets',
          'content-type': 'application/json',
          expect: '100-continue',
          ...headers,
        });
        stream.on('continue', () => {
          continued = true;
          stream.end('{"name":"rex"}');
        });
        stream.on('response', (head) => {
          stream.resume();
          stream.on('end', () => resolve({ continued, status: Number(head[':status']) }));
        });
        stream.on('error', reject);
      });

    expect(await ask({})).toEqual({ continued: false, status: 401 });
    expect(upstream.requests).toHaveLength(0);
    expect(await ask(auth)).toEqual({ continued: true, status: 200 });
    expect(upstream.requests.at(-1)!.body).toBe('{"name":"rex"}');
  });
});

describe('APIKeyAuthType apikey over h2', () => {
  let certificate: TestCertificate;
  beforeAll(async () => {
    certificate = await createTestCertificate();
  });
  afterAll(() => rmSync(certificate.dir, { recursive: true, force: true }));

  it('admits a key on an h2 stream over TLS, and refuses it over h2c as sent in the clear', async () => {
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const gateway = await startTestGateway(
      petsConfig(`${upstream.url}/pets`, {
        APIKeyAuthType: 'apikey',
        tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
      }),
    );
    defer(() => gateway.close());
    const overTls = await http2Fetch(`https://127.0.0.1:${gateway.running.ports.https}`, {
      path: '/pets/1',
      headers: { apikey: devKey },
      ca: certificate.cert,
    });
    expect(overTls.status).toBe(200);
    const inTheClear = await http2Fetch(gateway.url, { path: '/pets/1', headers: { apikey: devKey } });
    expect(inTheClear.status).toBe(401);
    expect(upstream.requests).toHaveLength(1);
  });
});

describe('shutdown with HTTP/2 connections open', () => {
  it('lets a stream in flight finish, and tells the connection to go (GOAWAY)', async () => {
    let release: (() => void) | null = null;
    const held = new Promise<void>((resolve) => (release = resolve));
    const upstream = await startUpstream((_req, res: ServerResponse) => {
      void held.then(() => res.end('late but whole'));
    });
    defer(() => upstream.close());
    const gateway = await startTestGateway(petsConfig(`${upstream.url}/pets`, { shutdownTimeout: 10_000 }));
    const session = await http2Session(gateway.url);
    defer(() => session.close());
    const goaway = new Promise<void>((resolve) => session.once('goaway', () => resolve()));

    const inFlight = http2Request(session, { path: '/pets/1', headers: auth });
    await new Promise<void>((resolve) => {
      const check = () => (upstream.requests.length > 0 ? resolve() : setImmediate(check));
      check();
    });
    const closed = gateway.close();
    await goaway;
    release!();
    const answer = await inFlight;
    expect(answer).toMatchObject({ status: 200, body: 'late but whole' });
    await closed;
  });
});

describe('an upstream answer with fields HTTP/2 forbids', () => {
  it('reaches an HTTP/2 client without them, where Node would refuse to send it', async () => {
    const upstream = await startUpstream((_req, res) => {
      res.writeHead(200, {
        'content-type': 'text/plain',
        host: 'upstream.internal',
        'http2-settings': 'AAMAAABkAAQAAP__',
        'x-kept': 'yes',
      });
      res.end('ok');
    });
    defer(() => upstream.close());
    const gateway = await startTestGateway(petsConfig(`${upstream.url}/pets`));
    defer(() => gateway.close());
    const answer = await http2Fetch(gateway.url, { path: '/pets/1', headers: auth });
    expect(answer).toMatchObject({ status: 200, body: 'ok' });
    expect(answer.headers['x-kept']).toBe('yes');
    expect(answer.headers.host).toBeUndefined();
    expect(answer.headers['http2-settings']).toBeUndefined();
  });
});
