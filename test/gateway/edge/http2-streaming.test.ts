import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import { credentials, withKey } from '../../helpers/grpc-credentials.js';
import { greeterApi, greeterClient, startGreeterUpstream } from '../../helpers/grpc-greeter.js';
import { http2Session } from '../../helpers/http2-client.js';
import { useSuiteUpstream } from '../../helpers/suite-upstream.js';
import { accessLines, petsConfig, startTestGateway, type TestGateway } from '../../helpers/test-gateway.js';

/**
 * Issue 42, point 3: `server.requestTimeout` bounds the arrival of a request's head and of an ordinary
 * body. A stream whose request is a stream of messages (a client-streaming or bidirectional gRPC call, a
 * request body beside the event stream that answers it) is bounded as its answer is: by `proxyTimeout`
 * between messages and by its `grpc-timeout`, not by requestTimeout.
 */
const defer = cleanupAfterEach();
const requestTimeout = 2_000;
const greeter = useSuiteUpstream(() => startGreeterUpstream());

/**
 * An HTTP/1.1 upstream of /pets that answers a POST as soon as its head has come: with an event stream
 * that says `opened`, then `got <body>` once the body has ended; or, to a request that says `x-whole:
 * 1`, `ok` once its body has ended (as most upstreams do).
 */
const pets = useSuiteUpstream(async () => {
  const heads: IncomingMessage[] = [];
  const server = http.createServer((req, res: ServerResponse) => {
    heads.push(req);
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    if (req.headers['x-whole'] === '1') {
      req.on('end', () => res.end('ok'));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: opened\n\n');
    req.on('end', () => res.end(`data: got ${body}\n\n`));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    heads,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()).closeAllConnections()),
  };
});

async function gatewayWithTimers(
  overrides: Record<string, unknown> = {},
): Promise<{ gateway: TestGateway; clock: FakeClock }> {
  const clock = new FakeClock();
  const config = petsConfig(`${pets().url}/pets`, {
    server: { headersTimeout: 1_000, requestTimeout },
    ...overrides,
  });
  config.apis = [...(config.apis as unknown[]), greeterApi(`http://${greeter().address}`)];
  const gateway = await startTestGateway(config, {}, { timers: clock });
  defer(() => gateway.close());
  return { gateway, clock };
}

const lineOf = (gateway: TestGateway, path: string) =>
  accessLines(gateway).find((line) => line.path === path);

describe('gRPC calls whose requests stream past requestTimeout', () => {
  it('keeps a bidirectional call open past requestTimeout, its messages flowing both ways until it ends OK', async () => {
    const { gateway, clock } = await gatewayWithTimers();
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    const chat = client.openChat(credentials());
    chat.say('ann');
    await expect.poll(() => chat.replies.length).toBe(1);
    await clock.advance(requestTimeout);
    chat.say('bob');
    await expect.poll(() => chat.replies.length).toBe(2);
    await clock.advance(2 * requestTimeout);
    chat.say('cy');
    await expect.poll(() => chat.replies.length).toBe(3);
    chat.end();
    const { status: ended, replies } = await chat.outcome;
    expect(ended.code).toBe(status.OK);
    expect(replies.map((reply) => reply.message)).toEqual(['Hello ann', 'Hello bob', 'Hello cy']);
    await expect
      .poll(() => lineOf(gateway, '/helloworld.Greeter/Chat'))
      .toMatchObject({ status: 200, outcome: 'completed' });
  });

  it('keeps a client-streaming call open past requestTimeout, its upstream silent until the last message', async () => {
    const { gateway, clock } = await gatewayWithTimers();
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    const callsBefore = greeter().calls.length;
    const gather = client.openGather(credentials());
    gather.say('ann');
    // The call has reached the upstream: its stream is open on the gateway, its request not yet whole.
    await expect.poll(() => greeter().calls.length).toBe(callsBefore + 1);
    await clock.advance(requestTimeout);
    gather.say('bob');
    await clock.advance(requestTimeout);
    gather.end();
    const { status: ended, replies } = await gather.outcome;
    expect(ended.code).toBe(status.OK);
    expect(replies).toEqual([{ message: 'Hello ann, bob' }]);
  });

  it('ends a client-streaming call with 4 DEADLINE_EXCEEDED once nothing has passed either way for proxyTimeout', async () => {
    // proxyTimeout is undici's own timer (real time), far below requestTimeout (the gateway's, moved by hand).
    const { gateway } = await gatewayWithTimers({ proxyTimeout: 300 });
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    const gather = client.openGather(credentials());
    gather.say('ann');
    const { status: ended } = await gather.outcome;
    expect(ended.code).toBe(status.DEADLINE_EXCEEDED);
    await expect
      .poll(() => lineOf(gateway, '/helloworld.Greeter/GatherHellos'))
      .toMatchObject({ status: 504, outcome: 'timeout' });
  });
});

describe('plain HTTP/2 requests and requestTimeout', () => {
  it('keeps a request body open past requestTimeout beside the event stream that answers it', async () => {
    const { gateway, clock } = await gatewayWithTimers();
    const session = await http2Session(gateway.url);
    defer(() => session.destroy());
    const stream = session.request({ ':method': 'POST', ':path': '/pets', ...withKey });
    stream.setEncoding('utf8');
    let events = '';
    stream.on('data', (chunk: string) => (events += chunk));
    const closed = new Promise<number | undefined>((resolve) =>
      stream.once('close', () => resolve(stream.rstCode)),
    );
    stream.write('{"name":');
    await expect.poll(() => events).toBe('data: opened\n\n');
    await clock.advance(requestTimeout);
    stream.end('"rex"}');
    expect(await closed).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(events).toBe('data: opened\n\ndata: got {"name":"rex"}\n\n');
  });

  it.each([
    ['an ordinary body', 'application/json'],
    ['a body that says it is gRPC, to an API that is not', 'application/grpc'],
  ])(
    'still resets with CANCEL at requestTimeout a stream whose body has not arrived whole: %s',
    async (_body, type) => {
      const { gateway, clock } = await gatewayWithTimers();
      const session = await http2Session(gateway.url);
      defer(() => session.destroy());
      const headsBefore = pets().heads.length;
      const stream = session.request({
        ':method': 'POST',
        ':path': '/pets',
        'content-length': '10',
        'content-type': type,
        'x-whole': '1',
        ...withKey,
      });
      stream.on('error', () => undefined);
      const closed = new Promise<number | undefined>((resolve) =>
        stream.once('close', () => resolve(stream.rstCode)),
      );
      stream.write('slow');
      await expect.poll(() => pets().heads.length).toBe(headsBefore + 1);
      await clock.advance(requestTimeout - 1);
      expect(stream.closed).toBe(false);
      await clock.advance(1);
      expect(await closed).toBe(http2.constants.NGHTTP2_CANCEL);
      const upstreamSide = pets().heads.at(-1)!;
      await expect.poll(() => upstreamSide.destroyed).toBe(true);
      await expect.poll(() => lineOf(gateway, '/pets')).toMatchObject({ outcome: 'client_aborted' });
    },
  );
});
