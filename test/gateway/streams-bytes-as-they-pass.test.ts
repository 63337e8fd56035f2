import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore, get } from '../helpers/enforcement-gateways.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { greeterApi, greeterClient, startGreeterUpstream } from '../helpers/grpc-greeter.js';
import { credentials, withKey } from '../helpers/grpc-credentials.js';
import { http2Session } from '../helpers/http2-client.js';
import {
  accessLines,
  mb,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

/**
 * Event streams, downloads, uploads and gRPC streams are charged as their bytes pass (issue 42, point
 * 4): a flood through a 100 KB a minute restriction is ended within one chunk past it, by the bytes
 * themselves: the injected timers are never moved, so the tick never runs.
 */
const defer = cleanupAfterEach();
/** mb(0.1): 104,857 bytes a minute. */
const limit = 104_857;
/** The most one read hands the gateway at once (64 KiB): the chunk that fills the room. */
const chunk = 65_536;
/** What the upstream sends when let: 2 MB, in writes of 1,000 bytes. */
const sent = 2_000;
const piece = 'd'.repeat(1_000);

/** Payload bytes the upstream took of each upload, as they came, and whether each came whole. */
const uploads: Array<{ bytes: number; whole: boolean }> = [];

/** `/pets/stream` an event stream, `/pets/download` a download, each of 2 MB as fast as it goes; a POST's body is counted. */
function flood(req: IncomingMessage, res: ServerResponse): void {
  if (req.method === 'POST') {
    const upload = { bytes: 0, whole: false };
    uploads.push(upload);
    req.on('data', (data: Buffer) => (upload.bytes += data.length));
    req.on('end', () => {
      upload.whole = true;
      res.end('{}');
    });
    return;
  }
  const stream = req.url?.endsWith('/stream');
  res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/octet-stream' });
  res.on('error', () => undefined);
  for (let i = 0; i < sent && !res.destroyed; i += 1)
    res.write(stream ? `data: ${piece.slice(8)}\n\n` : piece);
}

const upstream = useSuiteUpstream(async () => {
  const server = http.createServer(flood);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
});
const greeter = useSuiteUpstream(() => startGreeterUpstream());

async function gatewayWithLimit(overrides: Record<string, unknown>): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig(upstream().url, { ...overrides, accessLog: { flushMs: 0 } }),
    {},
    { timers: new FakeTimers() },
  );
  defer(() => gateway.close());
  await setQuota(
    gateway,
    { type: 'API', name: 'System', restrictions: [mb(0.1, 1, 'minute')] },
    systemQuotaId,
  );
  return gateway;
}

/** GET `path` over HTTP/1.1: the body bytes the client got, and whether the answer came whole. */
function readOverHttp1(gateway: TestGateway, path: string): Promise<{ bytes: number; whole: boolean }> {
  const url = new URL(gateway.url);
  return new Promise((resolve, reject) => {
    http
      .get({ host: url.hostname, port: url.port, path, headers: withKey, agent: false }, (response) => {
        let bytes = 0;
        response.on('data', (data: Buffer) => (bytes += data.length));
        response.on('error', () => undefined);
        response.once('close', () => resolve({ bytes, whole: response.complete }));
      })
      .on('error', reject);
  });
}

/** GET `path` over h2c: the body bytes the client got, and the stream's RST code (0 when it ended whole). */
async function readOverHttp2(
  gateway: TestGateway,
  path: string,
): Promise<{ bytes: number; rstCode: number }> {
  const session = await http2Session(gateway.url);
  defer(() => session.close());
  const stream = session.request({ ':path': path, ...withKey });
  let bytes = 0;
  stream.on('data', (data: Buffer) => (bytes += data.length));
  stream.on('error', () => undefined);
  return new Promise((resolve) =>
    stream.once('close', () => resolve({ bytes, rstCode: stream.rstCode ?? 0 })),
  );
}

describe.each(eachStore)(
  'streams through a byte restriction, charged as they pass, on %s',
  (_name, store) => {
    it.each([
      ['an event stream', '/pets/stream'],
      ['a download', '/pets/download'],
    ])('cuts %s over HTTP/1.1 within one chunk past the limit', async (_kind, path) => {
      const gateway = await gatewayWithLimit(store());
      const { bytes, whole } = await readOverHttp1(gateway, path);
      expect(whole).toBe(false);
      expect(bytes).toBeGreaterThan(limit - chunk);
      expect(bytes).toBeLessThanOrEqual(limit + chunk);
      expect((await get(gateway)).status).toBe(429);
      await expect
        .poll(() => accessLines(gateway).find((line) => line.path === path))
        .toMatchObject({ endedBy: 'quota', quota: 'rejected', refusedBy: `${systemQuotaId}/0` });
    });

    it.each([
      ['an event stream', '/pets/stream'],
      ['a download', '/pets/download'],
    ])('resets %s over HTTP/2 with CANCEL within one chunk past the limit', async (_kind, path) => {
      const gateway = await gatewayWithLimit(store());
      const { bytes, rstCode } = await readOverHttp2(gateway, path);
      expect(rstCode).toBe(8);
      expect(bytes).toBeGreaterThan(limit - chunk);
      expect(bytes).toBeLessThanOrEqual(limit + chunk);
    });

    it('cuts an upload at the room: the upstream takes no more than the limit and never a whole body', async () => {
      const gateway = await gatewayWithLimit(store());
      const url = new URL(gateway.url);
      const taken = uploads.length;
      const outcome = await new Promise<string>((resolve) => {
        const req = http.request(
          {
            host: url.hostname,
            port: url.port,
            method: 'POST',
            path: '/pets',
            headers: withKey,
            agent: false,
          },
          (response) => resolve(`answered ${response.statusCode}`),
        );
        req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
        // 2 MB, chunked, written as fast as the gateway takes it.
        let written = 0;
        const write = (): void => {
          while (written < sent) {
            written += 1;
            if (!req.write(piece)) return void req.once('drain', write);
          }
          req.end();
        };
        write();
      });
      expect(outcome).toBe('answered 429');
      await expect.poll(() => uploads.length).toBe(taken + 1);
      const upload = uploads.at(-1)!;
      expect(upload.whole).toBe(false);
      expect(upload.bytes).toBeGreaterThan(limit - chunk);
      expect(upload.bytes).toBeLessThanOrEqual(limit);
      await expect
        .poll(() => accessLines(gateway).find((line) => line.verb === 'POST'))
        .toMatchObject({ endedBy: 'quota', quota: 'rejected' });
      expect((await get(gateway)).status).toBe(429);
    });

    it('answers an HTTP/2 upload cut at the room with 429, as a refusal, and ends its stream', async () => {
      const gateway = await gatewayWithLimit(store());
      const taken = uploads.length;
      const session = await http2Session(gateway.url);
      defer(() => session.destroy());
      const stream = session.request({ ':method': 'POST', ':path': '/pets', ...withKey });
      stream.on('error', () => undefined);
      const answered = new Promise<{ status: number; body: string; rstCode: number }>((resolve) => {
        let body = '';
        let status = 0;
        stream.on('response', (head) => (status = Number(head[':status'])));
        stream.setEncoding('utf8');
        stream.on('data', (data: string) => (body += data));
        stream.once('close', () => resolve({ status, body, rstCode: stream.rstCode ?? -1 }));
      });
      let written = 0;
      const write = (): void => {
        while (written < sent && !stream.destroyed) {
          written += 1;
          if (!stream.write(piece)) return void stream.once('drain', write);
        }
        if (!stream.destroyed) stream.end();
      };
      write();
      // The client is asked to stop sending without error (RFC 9113 §8.1), its answer whole.
      expect(await answered).toMatchObject({ status: 429, rstCode: 0 });
      expect(JSON.parse((await answered).body)).toMatchObject({
        message: 'Too Many Requests: byte quota exhausted',
      });
      await expect.poll(() => uploads.length).toBe(taken + 1);
      expect(uploads.at(-1)!.whole).toBe(false);
      await expect
        .poll(() => accessLines(gateway).find((line) => line.verb === 'POST'))
        .toMatchObject({ status: 429, endedBy: 'quota', quota: 'rejected' });
    });

    it('ends a gRPC chat its client keeps sending on RESOURCE_EXHAUSTED, with its trailers', async () => {
      const gateway = await gatewayWithLimit({
        apis: [greeterApi(`http://${greeter().address}`)],
        ...store(),
      });
      const client = greeterClient(new URL(gateway.url).host);
      defer(() => client.close());
      const chat = client.openChat(credentials());
      let ended = false;
      const outcome = chat.outcome.finally(() => (ended = true));
      // Names of 1,000 bytes, echoed, as fast as the call takes them, until the gateway ends it.
      const say = (): void => {
        for (let i = 0; i < 20 && !ended; i += 1) chat.say('s'.repeat(1_000));
        if (!ended) setImmediate(say);
      };
      say();
      const { status: end } = await outcome;
      expect(end.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(end.details).toBe('byte quota exhausted');
    });

    it('ends a gRPC server-streaming flood RESOURCE_EXHAUSTED within one chunk past the limit', async () => {
      const gateway = await gatewayWithLimit({
        apis: [greeterApi(`http://${greeter().address}`)],
        ...store(),
      });
      const client = greeterClient(new URL(gateway.url).host);
      defer(() => client.close());
      const name = `flood ${'x'.repeat(994)}`;
      const call = client.streamHellos(name, credentials());
      const { status: ended } = await call.outcome;
      expect(ended.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(ended.details).toBe('byte quota exhausted');
      // Each greeting is about 1,010 bytes with its framing; 500 were sent.
      const got = call.replies.reduce((sum, reply) => sum + reply.message.length, 0);
      expect(got).toBeGreaterThan(limit - chunk);
      expect(got).toBeLessThanOrEqual(limit + chunk);
    });
  },
);
