import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../helpers/fake-clock.js';
import { FakeTimers } from '../../helpers/fake-timers.js';
import {
  dataFrame,
  errorCode,
  errorOf,
  frameType,
  headersFrame,
  openRawHttp2,
  pinged,
  requestFields,
  rstStreamFrame,
  type RawHttp2Connection,
  type ReceivedFrame,
} from '../../helpers/http2-frames.js';
import { http2Request, http2Session } from '../../helpers/http2-client.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../../helpers/upstream.js';

/** An upstream that never answers: every request the gateway forwards stays open upstream. */
let silent: TestUpstream;
let gateway: TestGateway;
let authority: string;
const clock = new FakeClock();
const auth = ['authorization', basicAuth(devKey)] as const;
const connections: RawHttp2Connection[] = [];

beforeAll(async () => {
  silent = await startUpstream(() => undefined);
  gateway = await startTestGateway(petsConfig(`${silent.url}/pets`), {}, { now: clock.now });
  authority = new URL(gateway.url).host;
});

afterAll(async () => {
  for (const connection of connections) connection.close();
  await gateway.close();
  await silent.close();
});

async function connect(to: TestGateway = gateway): Promise<RawHttp2Connection> {
  const connection = await openRawHttp2(Number(new URL(to.url).port));
  connections.push(connection);
  // The server's SETTINGS (its stream limit among them) have come, and been acknowledged.
  await connection.frame((received) => received.type === frameType.settings);
  return connection;
}

/** The requests of the streams named `name` that reached the upstream. */
const forwarded = (name: string) =>
  silent.requests.filter((seen) => seen.url.startsWith(`/pets/${name}-`)).length;

/** Opens streams `from`, `from + 2`, … (`count` of them) and resets each at once: the rapid reset. */
function rapidReset(connection: RawHttp2Connection, from: number, count: number, name = 'reset'): void {
  const frames: Buffer[] = [];
  for (let i = 0; i < count; i += 1) {
    const id = from + 2 * i;
    frames.push(
      headersFrame(id, requestFields(authority, `/pets/${name}-${id}`, [auth]), { endStream: true }),
      rstStreamFrame(id, errorCode.cancel),
    );
  }
  connection.send(...frames);
}

describe('rapid reset (CVE-2023-44487)', () => {
  it('closes with GOAWAY ENHANCE_YOUR_CALM a connection that resets more than 100 streams in a second; upstream requests stay bounded', async () => {
    const connection = await connect();
    rapidReset(connection, 1, 1_000, 'rapid');
    const goaway = await connection.frame((received) => received.type === frameType.goaway);
    expect(errorOf(goaway)).toBe(errorCode.enhanceYourCalm);
    await connection.closed;
    // At most the streams reset before the bound closed the connection reached the upstream.
    expect(forwarded('rapid')).toBeLessThanOrEqual(101);
  });

  it('keeps a connection that resets 100 streams in each second', async () => {
    const connection = await connect();
    rapidReset(connection, 1, 100);
    // The gateway has seen the first hundred resets before its clock moves a second on.
    await pinged(connection);
    await clock.advance(1_000);
    rapidReset(connection, 201, 100);
    // A stream after them is still answered: the connection was kept.
    connection.send(
      headersFrame(401, requestFields(authority, '/pets/x', [['x-probe', '1']]), { endStream: true }),
    );
    const answer = await connection.frame(
      (received) => received.streamId === 401 || received.type === frameType.goaway,
    );
    expect(answer.type).toBe(frameType.headers);
  });
});

describe('a stream flood', () => {
  it('closes a connection that opens more than 100 streams at once past its SETTINGS; the upstream gets at most 100', async () => {
    const connection = await connect();
    const frames: Buffer[] = [];
    for (let i = 0; i < 150; i += 1)
      frames.push(
        headersFrame(1 + 2 * i, requestFields(authority, `/pets/flood-${i}`, [auth]), { endStream: true }),
      );
    connection.send(...frames);
    const goaway = await connection.frame((received) => received.type === frameType.goaway);
    expect(errorOf(goaway)).not.toBe(0);
    await connection.closed;
    expect(forwarded('flood')).toBeLessThanOrEqual(100);
  });
});

describe('the server timeouts on HTTP/2', () => {
  let timed: TestGateway;
  let upstream: TestUpstream;
  const held: ServerResponse[] = [];
  // The bounds run on timers the tests move: each is passed exactly, however slow the machine. Three
  // values apart, so that the timer each test waits for is its own.
  const timers = new FakeTimers();
  const headersTimeout = 5_000;
  const keepAliveTimeout = 6_000;
  const requestTimeout = 7_000;

  beforeAll(async () => {
    // Answers /pets/held with its head and holds the rest until `release`; answers the rest at once.
    upstream = await startUpstream((_req, res, seen) => {
      if (!seen.url.endsWith('/held')) return void res.end('ok');
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('head ');
      held.push(res);
    });
    timed = await startTestGateway(
      petsConfig(`${upstream.url}/pets`, { server: { headersTimeout, requestTimeout, keepAliveTimeout } }),
      {},
      { timers },
    );
  });

  afterAll(async () => {
    await timed.close();
    await upstream.close();
  });

  const isGoaway = (received: ReceivedFrame) => received.type === frameType.goaway;

  it('closes a connection that opens no stream within headersTimeout', async () => {
    const connection = await connect(timed);
    await expect.poll(() => timers.waiting()).toContain(headersTimeout);
    timers.advance(headersTimeout - 1);
    // What the gateway sent before the PING's answer is all it sent: no GOAWAY yet.
    await pinged(connection);
    expect(connection.frames.filter(isGoaway)).toEqual([]);
    timers.advance(1);
    const goaway = await connection.frame(isGoaway);
    expect(errorOf(goaway)).toBe(0);
    await connection.closed;
  });

  it('closes a connection idle for keepAliveTimeout after its last stream', async () => {
    const session = await http2Session(timed.url);
    const sessionClosed = new Promise((resolve) => session.once('close', resolve));
    const answer = await http2Request(session, { path: '/pets/1', headers: { authorization: auth[1] } });
    expect(answer.status).toBe(200);
    // The gateway's side of the stream has closed: the connection is idle from now on.
    await expect.poll(() => timers.waiting()).toContain(keepAliveTimeout);
    timers.advance(keepAliveTimeout - 1);
    await new Promise((resolve) => session.ping(resolve));
    expect(session.closed).toBe(false);
    timers.advance(1);
    await sessionClosed;
    expect(session.closed).toBe(true);
  });

  it('resets with CANCEL a stream whose request has not arrived whole within requestTimeout', async () => {
    const connection = await connect(timed);
    const host = new URL(timed.url).host;
    connection.send(
      headersFrame(1, requestFields(host, '/pets', [auth, ['content-length', '10']], 'POST')),
      dataFrame(1, 'slow'),
    );
    await expect.poll(() => timers.waiting()).toContain(requestTimeout);
    timers.advance(requestTimeout - 1);
    await pinged(connection);
    expect(connection.frames.filter((received) => received.type === frameType.rstStream)).toEqual([]);
    timers.advance(1);
    const reset = await connection.frame((received) => received.type === frameType.rstStream);
    expect([reset.streamId, errorOf(reset)]).toEqual([1, errorCode.cancel]);
  });

  it('leaves a request that has arrived whole open past requestTimeout while its answer runs', async () => {
    const session = await http2Session(timed.url);
    const long = http2Request(session, { path: '/pets/held', headers: { authorization: auth[1] } });
    await expect.poll(() => held.length).toBe(1);
    // A slow request opened after it is reset at requestTimeout: the held one outlives it.
    const slow = session.request({
      ':method': 'POST',
      ':path': '/pets',
      'content-length': '10',
      ...{ authorization: auth[1] },
    });
    slow.write('slow');
    await expect.poll(() => timers.waiting()).toContain(requestTimeout);
    const code = new Promise<number>((resolve) => slow.once('close', () => resolve(slow.rstCode ?? -1)));
    timers.advance(requestTimeout);
    expect(await code).toBe(errorCode.cancel);
    held.shift()!.end('and tail');
    expect(await long).toMatchObject({ status: 200, body: 'head and tail' });
    session.close();
  });
});
