import http2 from 'node:http2';
import net from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startCliGateway } from '../helpers/cli-gateway.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { startHoldingUpstream, type HoldingUpstream } from '../helpers/holding-upstream.js';
import { http2Request, http2Session } from '../helpers/http2-client.js';
import { poolConfig } from '../helpers/pool-gateways.js';
import { auth } from '../helpers/proxy-parts.js';
import { request } from '../helpers/raw-http.js';
import { accessLines, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * Every way an exchange of a pool can end while it is being sent to another target (the first answered
 * 503, the second holds it) ends it once: the second target's request is closed (none is left open),
 * and the exchange has exactly one access line. The client resets its connection, the gateway closes
 * (SIGTERM's drain), an HTTP/2 client resets its stream or sends GOAWAY; and a reload that replaces
 * the targets leaves it on its own.
 */
const defer = cleanupAfterEach();
const shutdownTimeout = 10_000;

interface Retrying {
  gateway: TestGateway;
  clock: FakeClock;
  down: TestUpstream;
  /** The target the exchanges are sent on to: it holds them until told. */
  holding: HoldingUpstream;
}

/** A target answering 503, and one holding what it is sent. */
async function targets(): Promise<Pick<Retrying, 'down' | 'holding'>> {
  const down = await startUpstream((_req, res) => res.writeHead(503).end('down'));
  defer(() => down.close());
  const holding = await startHoldingUpstream();
  defer(() => holding.close());
  return { down, holding };
}

async function retrying(): Promise<Retrying> {
  const { down, holding } = await targets();
  const clock = new FakeClock();
  // proxyTimeout and the grace period are the gateway's timers: nothing ends for time unless moved.
  const config = {
    ...poolConfig({ targets: [down.url, holding.url] }),
    proxyTimeout: 60_000,
    shutdownTimeout,
  };
  const gateway = await startTestGateway(config, {}, { timers: clock });
  defer(() => gateway.close());
  return { gateway, clock, down, holding };
}

/** The access lines of the requests whose path holds `tag`. */
const linesOf = (gateway: TestGateway, tag: string) =>
  accessLines(gateway).filter(({ path }) => String(path).includes(tag));

/** Waits until the holding target holds `count` requests. */
const holds = (holding: HoldingUpstream, count: number) =>
  vi.waitFor(() => expect(holding.held()).toBe(count));

/**
 * Sends one more GET, lets it be answered and waits for its access line: a second line of an exchange
 * that ended before it would be written by then.
 */
async function oneMore(gateway: TestGateway, holding: HoldingUpstream): Promise<void> {
  const next = request(gateway.url, { path: '/pets/next', headers: auth });
  await holds(holding, 1);
  holding.answerAll();
  expect((await next).status).toBe(200);
  await vi.waitFor(() => expect(linesOf(gateway, 'next')).toHaveLength(1));
}

describe('an exchange of a pool that ends while it is sent to another target', () => {
  it('ends once when its client resets the connection: the retry is cut, one access line', async () => {
    const { gateway, down, holding } = await retrying();
    const socket = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write(`GET /pets/reset HTTP/1.1\r\nHost: gw.test\r\nAuthorization: ${auth.authorization}\r\n\r\n`);
    await holds(holding, 1);
    expect(down.requests.map(({ url }) => url)).toEqual(['/reset']);
    socket.resetAndDestroy();
    // The request sent on is closed upstream: nothing is left open.
    await holds(holding, 0);
    await vi.waitFor(() => expect(linesOf(gateway, 'reset')).toHaveLength(1));
    await oneMore(gateway, holding);
    expect(linesOf(gateway, 'reset')).toHaveLength(1);
    expect(linesOf(gateway, 'reset')[0]).toMatchObject({
      outcome: 'client_aborted',
      target: holding.url,
      tried: 2,
    });
  });

  it('is drained when the gateway closes: the retry is answered, one access line', async () => {
    const { gateway, holding } = await retrying();
    const answer = request(gateway.url, { path: '/pets/drained', headers: auth });
    await holds(holding, 1);
    const closing = gateway.running.close();
    holding.answerAll();
    expect(await answer).toMatchObject({ status: 200, body: 'done' });
    await closing;
    expect(linesOf(gateway, 'drained')).toHaveLength(1);
    expect(linesOf(gateway, 'drained')[0]).toMatchObject({ status: 200, target: holding.url, tried: 2 });
  });

  it('is drained by a real process on SIGTERM: the retry is answered, the process exits, one access line', async () => {
    const { down, holding } = await targets();
    const config = { ...poolConfig({ targets: [down.url, holding.url] }), accessLog: { flushMs: 0 } };
    const gateway = await startCliGateway(config, defer);
    const answer = request(gateway.url, { path: '/pets/sigterm', headers: auth });
    await holds(holding, 1);
    gateway.cli.child.kill('SIGTERM');
    await gateway.until(() => gateway.logs().some(({ msg }) => msg === 'shutting down'));
    holding.answerAll();
    expect(await answer).toMatchObject({ status: 200, body: 'done' });
    expect((await gateway.cli.exited).code).toBe(0);
    const lines = gateway.accessLines().filter(({ path }) => String(path).includes('sigterm'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ status: 200, target: holding.url, tried: 2 });
  });

  it('is cut once when the grace period of the close passes: nothing left open, one access line', async () => {
    const { gateway, clock, holding } = await retrying();
    const answer = request(gateway.url, { path: '/pets/graceless', headers: auth }).catch(
      (error: Error) => error,
    );
    await holds(holding, 1);
    const closing = gateway.running.close();
    await clock.advance(shutdownTimeout);
    await closing;
    expect(await answer).toBeInstanceOf(Error);
    await holds(holding, 0);
    expect(linesOf(gateway, 'graceless')).toHaveLength(1);
    expect(linesOf(gateway, 'graceless')[0]).toMatchObject({ target: holding.url, tried: 2 });
  });

  it('stays on its targets through a reload that replaces them: answered once, the next goes to the new', async () => {
    const { gateway, holding } = await retrying();
    const fresh = await startUpstream((_req, res) => res.end('fresh'));
    defer(() => fresh.close());
    const answer = request(gateway.url, { path: '/pets/reloaded', headers: auth });
    await holds(holding, 1);
    const outcome = await gateway.reloadWith({
      ...poolConfig({ targets: [fresh.url] }),
      proxyTimeout: 60_000,
      shutdownTimeout,
    });
    expect(outcome).toMatchObject({ applied: true });
    holding.answerAll();
    expect(await answer).toMatchObject({ status: 200, body: 'done' });
    expect(await request(gateway.url, { path: '/pets/next', headers: auth })).toMatchObject({
      status: 200,
      body: 'fresh',
    });
    await vi.waitFor(() => expect(linesOf(gateway, 'next')).toHaveLength(1));
    expect(linesOf(gateway, 'reloaded')).toHaveLength(1);
    expect(linesOf(gateway, 'reloaded')[0]).toMatchObject({ status: 200, target: holding.url, tried: 2 });
  });

  it('ends once when an HTTP/2 client resets its stream (RST_STREAM): the session goes on', async () => {
    const { gateway, holding } = await retrying();
    const session = await http2Session(gateway.url);
    defer(() => void session.destroy());
    const stream = session.request({ ':method': 'GET', ':path': '/pets/h2-reset', ...auth });
    stream.on('error', () => undefined);
    await holds(holding, 1);
    stream.close(http2.constants.NGHTTP2_CANCEL);
    await holds(holding, 0);
    await vi.waitFor(() => expect(linesOf(gateway, 'h2-reset')).toHaveLength(1));
    // The session is still good for the next stream.
    const next = http2Request(session, { path: '/pets/h2-next', headers: auth });
    await holds(holding, 1);
    holding.answerAll();
    expect((await next).status).toBe(200);
    await vi.waitFor(() => expect(linesOf(gateway, 'h2-next')).toHaveLength(1));
    expect(linesOf(gateway, 'h2-reset')).toHaveLength(1);
    expect(linesOf(gateway, 'h2-reset')[0]).toMatchObject({
      outcome: 'client_aborted',
      target: holding.url,
      tried: 2,
    });
  });

  it('ends once when its HTTP/2 client drops the connection: the retry is cut, one access line', async () => {
    const { gateway, holding } = await retrying();
    const session = await http2Session(gateway.url);
    const stream = session.request({ ':method': 'GET', ':path': '/pets/h2-dropped', ...auth });
    stream.on('error', () => undefined);
    await holds(holding, 1);
    session.destroy();
    await holds(holding, 0);
    await vi.waitFor(() => expect(linesOf(gateway, 'h2-dropped')).toHaveLength(1));
    await oneMore(gateway, holding);
    expect(linesOf(gateway, 'h2-dropped')).toHaveLength(1);
    expect(linesOf(gateway, 'h2-dropped')[0]).toMatchObject({
      outcome: 'client_aborted',
      target: holding.url,
      tried: 2,
    });
  });

  it('is answered once when its HTTP/2 client sends GOAWAY: the stream it opened still ends', async () => {
    const { gateway, holding } = await retrying();
    const session = await http2Session(gateway.url);
    defer(() => void session.destroy());
    const answer = http2Request(session, { path: '/pets/h2-goaway', headers: auth });
    await holds(holding, 1);
    // A graceful close: GOAWAY, then the streams open are let finish.
    const closed = new Promise((resolve) => session.close(() => resolve(undefined)));
    holding.answerAll();
    expect(await answer).toMatchObject({ status: 200, body: 'done' });
    await closed;
    await vi.waitFor(() => expect(linesOf(gateway, 'h2-goaway')).toHaveLength(1));
    await oneMore(gateway, holding);
    expect(linesOf(gateway, 'h2-goaway')).toHaveLength(1);
    expect(linesOf(gateway, 'h2-goaway')[0]).toMatchObject({ status: 200, target: holding.url, tried: 2 });
  });

  it('is answered once over HTTP/2 when the gateway closes (its GOAWAY) during the retry', async () => {
    const { gateway, holding } = await retrying();
    const session = await http2Session(gateway.url);
    defer(() => void session.destroy());
    const goaway = new Promise((resolve) => session.once('goaway', resolve));
    const answer = http2Request(session, { path: '/pets/h2-drained', headers: auth });
    await holds(holding, 1);
    const closing = gateway.running.close();
    await goaway;
    holding.answerAll();
    expect(await answer).toMatchObject({ status: 200, body: 'done' });
    await closing;
    expect(linesOf(gateway, 'h2-drained')).toHaveLength(1);
    expect(linesOf(gateway, 'h2-drained')[0]).toMatchObject({ status: 200, target: holding.url, tried: 2 });
  });
});
