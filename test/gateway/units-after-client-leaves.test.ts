import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { describe, expect, inject, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore } from '../helpers/enforcement-gateways.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { greeterApi } from '../helpers/grpc-greeter.js';
import { http2Session } from '../helpers/http2-client.js';
import {
  accessLines,
  basicAuth,
  concurrency,
  devKey,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type StartClocks,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import { upstreamDrainCapMs } from '../../src/upstream/upstream-proxy.js';

/**
 * A client that leaves before the end of an exchange a throttleunits restriction charges still pays what
 * the upstream's answer says: the gateway reads the rest of the answer, discarding it, and charges its
 * trailer or header; only an answer that cannot be read to its end is charged the default.
 */
const defer = cleanupAfterEach();
const auth = basicAuth(devKey);

/** An upstream whose every answer waits, at a point the test chooses, until the test lets it go on. */
async function gatedUpstream(answer: (res: ServerResponse, gate: Promise<void>) => void) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let arrived!: () => void;
  const requestArrived = new Promise<void>((resolve) => (arrived = resolve));
  let upstreamDone!: (how: string) => void;
  const done = new Promise<string>((resolve) => (upstreamDone = resolve));
  const upstream = await startUpstream((_req: IncomingMessage, res: ServerResponse) => {
    res.on('finish', () => upstreamDone('finished'));
    res.on('close', () => upstreamDone(res.writableFinished ? 'finished' : 'cut off'));
    arrived();
    answer(res, gate);
  });
  defer(() => upstream.close());
  return { url: upstream.url, requestArrived, release: () => open(), done };
}

/** Writes a head, one chunk, then (once let go) the rest with `X-Tokens: 8` in a trailer. */
const trailerAfterGate = (res: ServerResponse, gate: Promise<void>) => {
  res.writeHead(200, { 'content-type': 'text/plain', trailer: 'X-Tokens' });
  res.write('first chunk');
  void gate.then(() => {
    res.write('the rest, which nobody reads');
    res.addTrailers({ 'X-Tokens': '8' });
    res.end();
  });
};

const tokens = (extra: Record<string, unknown> = {}) => ({
  api: '*',
  method: '*',
  type: 'throttleunits',
  config: { units: 100, per: 1, period: 'hour', header: 'X-Tokens', ...extra },
});

const usedOf = async (gateway: TestGateway) =>
  (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]!.used;

const unreadable = async (gateway: TestGateway) => {
  const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  return /quotagate_units_unreadable_total\{quota="System",restriction="0"\} (\d+)/.exec(metrics)?.[1] ?? '0';
};

/** A GET whose client hangs up as soon as the first body bytes arrive. */
function hangUpAfterFirstChunk(gateway: TestGateway): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${gateway.url}/pets/1`,
      { headers: { authorization: auth }, agent: false },
      (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (!req.destroyed) reject(error);
    });
  });
}

/** A GET whose client hangs up once its request has reached the upstream, before any answer. */
async function hangUpBeforeHead(gateway: TestGateway, requestArrived: Promise<void>): Promise<void> {
  const client = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
  client.on('error', () => undefined);
  client.write(`GET /pets/1 HTTP/1.1\r\nHost: gw\r\nAuthorization: ${auth}\r\n\r\n`);
  await requestArrived;
  client.destroy();
}

/** Whether a connection to `url` is refused. */
const refused = (url: string) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
    socket.on('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(true));
  });

/** The gateway has seen the client leave: its exchange's access line says so. */
const clientLeft = (gateway: TestGateway) =>
  expect.poll(() => accessLines(gateway).at(-1)?.outcome).toBe('client_aborted');

async function gatewayOver(
  url: string,
  store: Record<string, unknown>,
  restriction: Record<string, unknown>,
  clocks: StartClocks = {},
) {
  const gateway = await startTestGateway(petsConfig(`${url}/pets`, store), {}, clocks);
  defer(() => gateway.close());
  await setQuota(gateway, { type: 'API', name: 'System', restrictions: [restriction] }, systemQuotaId);
  return gateway;
}

describe.each(eachStore)('a client that leaves early on %s', (_storeName, store) => {
  it('is charged the trailer of a chunked answer it hung up on after the first chunk', async () => {
    const upstream = await gatedUpstream(trailerAfterGate);
    const gateway = await gatewayOver(upstream.url, store(), tokens({ default: 1 }));
    await hangUpAfterFirstChunk(gateway);
    await clientLeft(gateway);
    upstream.release();
    // The upstream's answer was read to its end: nobody cut it off.
    expect(await upstream.done).toBe('finished');
    await expect.poll(() => usedOf(gateway)).toBe(8);
    expect(await unreadable(gateway)).toBe('0');
  });

  it('is charged what the header says when it left before the answer began', async () => {
    const upstream = await gatedUpstream((res, gate) => {
      void gate.then(() => {
        res.writeHead(200, { 'content-type': 'text/plain', 'x-tokens': '6' });
        res.end('an answer nobody reads');
      });
    });
    const gateway = await gatewayOver(upstream.url, store(), tokens({ default: 1 }));
    await hangUpBeforeHead(gateway, upstream.requestArrived);
    await clientLeft(gateway);
    upstream.release();
    expect(await upstream.done).toBe('finished');
    await expect.poll(() => usedOf(gateway)).toBe(6);
  });

  it('is charged the default, counted, when the answer breaks off before its end', async () => {
    const upstream = await gatedUpstream((res, gate) => {
      res.writeHead(200, { 'content-type': 'text/plain', trailer: 'X-Tokens' });
      res.write('first chunk');
      void gate.then(() => res.socket?.destroy());
    });
    const gateway = await gatewayOver(upstream.url, store(), tokens({ default: 5 }));
    await hangUpAfterFirstChunk(gateway);
    await clientLeft(gateway);
    upstream.release();
    await expect.poll(() => usedOf(gateway)).toBe(5);
    expect(await unreadable(gateway)).toBe('1');
  });
});

describe('the rest of an answer read for its units', () => {
  it('is given up at the total cap: the upstream is cut off and the default charged', async () => {
    const timers = new FakeTimers();
    const upstream = await gatedUpstream((res) => {
      res.writeHead(200, { 'content-type': 'text/plain', trailer: 'X-Tokens' });
      res.write('first chunk, and never an end');
    });
    const gateway = await gatewayOver(upstream.url, {}, tokens({ default: 3 }), { timers });
    await hangUpAfterFirstChunk(gateway);
    await clientLeft(gateway);
    timers.advance(upstreamDrainCapMs - 1);
    expect(await usedOf(gateway)).toBe(0);
    timers.advance(1);
    expect(await upstream.done).toBe('cut off');
    await expect.poll(() => usedOf(gateway)).toBe(3);
    expect(await unreadable(gateway)).toBe('1');
  });

  it('is read for an HTTP/2 client that reset its stream after the first chunk', async () => {
    const upstream = await gatedUpstream(trailerAfterGate);
    const gateway = await gatewayOver(upstream.url, {}, tokens());
    const session = await http2Session(gateway.url);
    defer(() => void session.close());
    const stream = session.request({ ':path': '/pets/1', authorization: auth });
    stream.on('error', () => undefined);
    await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    stream.close(http2.constants.NGHTTP2_CANCEL);
    await clientLeft(gateway);
    upstream.release();
    expect(await upstream.done).toBe('finished');
    await expect.poll(() => usedOf(gateway)).toBe(8);
  });

  it('is charged the default, counted, when it left before the head and the upstream then failed', async () => {
    const upstream = await gatedUpstream((res, gate) => {
      void gate.then(() => res.socket?.destroy());
    });
    const gateway = await gatewayOver(upstream.url, {}, tokens({ default: 4 }));
    await hangUpBeforeHead(gateway, upstream.requestArrived);
    await clientLeft(gateway);
    upstream.release();
    await expect.poll(() => usedOf(gateway)).toBe(4);
    expect(await unreadable(gateway)).toBe('1');
  });

  it('keeps a shutdown waiting, within its grace period, and charges what the answer ended with', async () => {
    const upstream = await gatedUpstream(trailerAfterGate);
    const store = {
      type: 'redis',
      url: inject('redisUrl'),
      prefix: `test:drain:${Date.now()}:${Math.random()}:`,
    };
    const staying = await gatewayOver(upstream.url, { store }, tokens({ default: 1 }));
    // Started once the quota is in the store: it loads it as it starts.
    const leaving = await startTestGateway(petsConfig(`${upstream.url}/pets`, { store }));
    await hangUpAfterFirstChunk(leaving);
    await clientLeft(leaving);
    const closed = leaving.close();
    // The gateway is shutting down: its data port takes no connection.
    await expect.poll(() => refused(leaving.url)).toBe(true);
    upstream.release();
    await closed;
    expect(await upstream.done).toBe('finished');
    await expect.poll(() => usedOf(staying)).toBe(8);
  });

  it('is read for a gRPC call the client cancelled after the first message: its trailers say the cost', async () => {
    let letGo!: () => void;
    const gate = new Promise<void>((resolve) => (letGo = resolve));
    let upstreamDone!: (how: string) => void;
    const done = new Promise<string>((resolve) => (upstreamDone = resolve));
    // An h2c gRPC server: a message, then (once let go) another and the status, with the cost in a trailer.
    const server = http2.createServer((_req, res) => {
      res.stream.on('close', () => upstreamDone(res.stream.rstCode === 0 ? 'finished' : 'cut off'));
      res.writeHead(200, { 'content-type': 'application/grpc' });
      res.write(Buffer.from([0, 0, 0, 0, 0]));
      void gate.then(() => {
        res.write(Buffer.from([0, 0, 0, 0, 0]));
        res.addTrailers({ 'grpc-status': '0', 'x-tokens': '5' });
        res.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const upstream = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    const gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9', { apis: [greeterApi(upstream)] }),
    );
    defer(() => gateway.close());
    await setQuota(gateway, { type: 'API', name: 'System', restrictions: [tokens()] }, systemQuotaId);
    const session = await http2Session(gateway.url);
    defer(() => void session.close());
    const call = session.request({
      ':method': 'POST',
      ':path': '/helloworld.Greeter/SayHello',
      'content-type': 'application/grpc',
      te: 'trailers',
      authorization: auth,
    });
    call.on('error', () => undefined);
    call.end(Buffer.from([0, 0, 0, 0, 0]));
    await new Promise<void>((resolve) => call.once('data', () => resolve()));
    call.close(http2.constants.NGHTTP2_CANCEL);
    await clientLeft(gateway);
    letGo();
    expect(await done).toBe('finished');
    await expect.poll(() => usedOf(gateway)).toBe(5);
  });

  it('keeps its concurrency slot while it is read: the upstream is still at work', async () => {
    const upstream = await gatedUpstream(trailerAfterGate);
    const gateway = await gatewayOver(upstream.url, {}, tokens());
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [tokens(), concurrency(1)] },
      systemQuotaId,
    );
    await hangUpAfterFirstChunk(gateway);
    await clientLeft(gateway);
    const slotsHeld = async () => (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[1]!.used;
    expect(await slotsHeld()).toBe(1);
    const refused = await fetch(`${gateway.url}/pets/1`, { headers: { authorization: auth } });
    expect(refused.status).toBe(429);
    await refused.text();
    upstream.release();
    expect(await upstream.done).toBe('finished');
    await expect.poll(() => usedOf(gateway)).toBe(8);
    // Read to its end: its slot is free, and the next request takes it and is answered whole.
    await expect.poll(slotsHeld).toBe(0);
    const next = await fetch(`${gateway.url}/pets/1`, { headers: { authorization: auth } });
    expect([next.status, await next.text()]).toEqual([200, 'first chunkthe rest, which nobody reads']);
  });

  it('is not read when no throttleunits restriction charges the exchange: the upstream is cut off', async () => {
    const upstream = await gatedUpstream(trailerAfterGate);
    const gateway = await gatewayOver(
      upstream.url,
      {},
      {
        api: '*',
        method: '*',
        type: 'throttle',
        config: { messages: 100, per: 1, period: 'hour' },
      },
    );
    await hangUpAfterFirstChunk(gateway);
    expect(await upstream.done).toBe('cut off');
  });
});
