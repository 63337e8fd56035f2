import http, { type ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { http2Session } from '../helpers/http2-client.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const auth = { authorization: basicAuth(devKey) };
const events = ['id: 1\ndata: first\n\n', 'id: 2\ndata: second\n\n', 'id: 3\ndata: third\n\n'];

/**
 * An event stream the test drives: the upstream sends its next event only once `next()` is called, so a
 * client that waits for each event before calling it waits forever if the gateway holds events back.
 */
class DrivenStream {
  private response: ServerResponse | null = null;
  private opened: Array<() => void> = [];
  sent = 0;

  readonly handler = (_req: unknown, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    // As event-stream servers do: the client learns the stream is open before the first event.
    res.flushHeaders();
    this.response = res;
    this.sent = 0;
    for (const wake of this.opened.splice(0)) wake();
  };

  /** Resolves once a client's request has reached the upstream. */
  open(): Promise<void> {
    return this.response ? Promise.resolve() : new Promise((resolve) => this.opened.push(resolve));
  }

  /** Sends the next event, and ends the stream after the last. */
  next(): void {
    const res = this.response!;
    res.write(events[this.sent]!);
    this.sent += 1;
    if (this.sent === events.length) {
      res.end();
      this.response = null;
    }
  }
}

/** Reads `stream` until its text holds `count` events; resolves with them. */
function eventsFrom(stream: Readable, count: number, seen: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const complete = text.split('\n\n').slice(0, -1);
      if (complete.length >= count) {
        stream.off('data', onData);
        seen.splice(0, seen.length, ...complete.map((event) => `${event}\n\n`));
        resolve();
      }
    };
    stream.on('data', onData);
    stream.once('error', reject);
  });
}

/** Resolves once `stream` has ended, the upstream's end of the event stream having come through. */
const ended = (stream: Readable): Promise<void> =>
  stream.readableEnded ? Promise.resolve() : new Promise((resolve) => stream.once('end', resolve).resume());

describe('server-sent events', () => {
  let driven: DrivenStream;
  let upstream: TestUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    driven = new DrivenStream();
    upstream = await startUpstream(driven.handler);
    gateway = await startTestGateway(petsConfig(`${upstream.url}/pets`, { accessLog: { flushMs: 0 } }));
  });

  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it('reach an HTTP/1.1 client one by one, as the upstream sends each', async () => {
    const url = new URL(gateway.url);
    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http
        .get({ host: url.hostname, port: url.port, path: '/pets/1', headers: auth, agent: false }, resolve)
        .on('error', reject);
    });
    expect(response.headers['content-type']).toBe('text/event-stream');
    const seen: string[] = [];
    await driven.open();
    for (let i = 1; i <= events.length; i += 1) {
      driven.next();
      // The upstream holds the next event until this one has reached the client.
      await eventsFrom(response, 1, seen);
      expect(seen).toEqual([events[i - 1]]);
    }
    await ended(response);
  });

  it('reach an HTTP/2 client one by one, as the upstream sends each', async () => {
    const session = await http2Session(gateway.url);
    try {
      const stream = session.request({ ':path': '/pets/1', ...auth });
      const head = await new Promise<Record<string, unknown>>((resolve) => stream.once('response', resolve));
      expect(head['content-type']).toBe('text/event-stream');
      const seen: string[] = [];
      await driven.open();
      for (let i = 1; i <= events.length; i += 1) {
        driven.next();
        await eventsFrom(stream, 1, seen);
        expect(seen).toEqual([events[i - 1]]);
      }
      await ended(stream);
    } finally {
      session.close();
    }
  });
});

describe('proxyTimeout between events', () => {
  let upstream: TestUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    // One event, then silence longer than proxyTimeout.
    upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(events[0]);
    });
    gateway = await startTestGateway(
      petsConfig(`${upstream.url}/pets`, { proxyTimeout: 200, accessLog: { flushMs: 0 } }),
    );
  });

  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it('cuts a stream whose upstream stays silent for proxyTimeout after an event, and logs it as a timeout', async () => {
    const url = new URL(gateway.url);
    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http
        .get({ host: url.hostname, port: url.port, path: '/pets/1', headers: auth, agent: false }, resolve)
        .on('error', reject);
    });
    const seen: string[] = [];
    await eventsFrom(response, 1, seen);
    expect(seen).toEqual([events[0]]);
    await new Promise((resolve) => response.once('close', resolve).resume());
    expect(response.complete).toBe(false);
    await vi.waitFor(() =>
      expect(accessLines(gateway).at(-1)).toMatchObject({ status: 200, outcome: 'timeout' }),
    );
  });
});
