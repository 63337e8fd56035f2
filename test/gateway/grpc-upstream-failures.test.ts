import http from 'node:http';
import http2, { type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { freePort } from '../helpers/free-port.js';
import { greeterApi, greeterClient, startGreeterUpstream } from '../helpers/grpc-greeter.js';
import { http2Fetch } from '../helpers/http2-client.js';
import {
  dataFrame,
  frameType,
  headersFrame,
  openRawHttp2,
  requestFields,
  statusOf,
} from '../helpers/http2-frames.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { credentials } from '../helpers/grpc-credentials.js';
import { grpcHead, helloMessage, startShapedGrpcUpstream } from '../helpers/shaped-grpc-upstream.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

/**
 * A gRPC call whose upstream fails, or whose deadline passes, as a gRPC client sees it (issue 32,
 * point 4): a gRPC status, never an HTTP error page, and a log line that says why.
 */
const defer = cleanupAfterEach();
const greeter = useSuiteUpstream(() => startGreeterUpstream());

async function gatewayOver(upstream: string, overrides: Record<string, unknown> = {}): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig('http://127.0.0.1:9', { apis: [greeterApi(upstream)], ...overrides }),
  );
  defer(() => gateway.close());
  return gateway;
}

const clientOf = (gateway: TestGateway) => {
  const client = greeterClient(new URL(gateway.url).host);
  defer(() => client.close());
  return client;
};

/** A SayHello message (its 5-byte prefix and protobuf) for `name`, as Node's HTTP/2 client sends it. */
const sayHelloMessage = (name: string) =>
  String.fromCharCode(0, 0, 0, 0, name.length + 2, 0x0a, name.length) + name;

/** A SayHello through the gateway with Node's HTTP/2 client, with fields of its own. */
const rawSayHello = (gateway: TestGateway, name: string, headers: Record<string, string>) =>
  http2Fetch(gateway.url, {
    method: 'POST',
    path: '/helloworld.Greeter/SayHello',
    headers: {
      'content-type': 'application/grpc',
      te: 'trailers',
      authorization: basicAuth(devKey),
      ...headers,
    },
    body: sayHelloMessage(name),
  });

describe('gRPC upstream failures', () => {
  it('answers UNAVAILABLE when the upstream speaks HTTP/1.1, and logs that it does not speak HTTP/2', async () => {
    const http1 = http.createServer((_req, res) => res.end('an HTTP/1.1 answer'));
    await new Promise<void>((resolve) => http1.listen(0, '127.0.0.1', resolve));
    defer(() => new Promise<void>((resolve) => http1.close(() => resolve())));
    const gateway = await gatewayOver(`http://127.0.0.1:${(http1.address() as AddressInfo).port}`);
    const outcome = await clientOf(gateway).sayHello('ann', credentials());
    expect(outcome.status.code).toBe(status.UNAVAILABLE);
    expect(outcome.status.details).toBe('Bad Gateway');
    expect(gateway.logs.find((line) => line.level === 40)).toMatchObject({
      msg: 'the upstream of a gRPC API does not speak HTTP/2 (h2c for http://, ALPN h2 for https://)',
      outcome: 'invalid',
    });
    await expect
      .poll(() => accessLines(gateway))
      .toMatchObject([{ status: 502, outcome: 'invalid', grpcStatus: status.UNAVAILABLE }]);
  });

  it('answers UNAVAILABLE when nothing listens at the upstream', async () => {
    const gateway = await gatewayOver(`http://127.0.0.1:${await freePort()}`);
    const outcome = await clientOf(gateway).sayHello('ann', credentials());
    expect(outcome.status.code).toBe(status.UNAVAILABLE);
    await expect.poll(() => accessLines(gateway)).toMatchObject([{ status: 502, outcome: 'unreachable' }]);
  });

  it.each([
    [
      'a message and the end, no trailers',
      (stream: ServerHttp2Stream) => {
        stream.respond(grpcHead());
        stream.end(helloMessage('Hello ann #1'));
      },
      [{ message: 'Hello ann #1' }],
    ],
    [
      'trailers without a grpc-status',
      (stream: ServerHttp2Stream) => {
        stream.respond(grpcHead(), { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'x-served-by': 'shaped' }));
        stream.end(helloMessage('Hello ann #1'));
      },
      [{ message: 'Hello ann #1' }],
    ],
    [
      'a head that ends the stream without a grpc-status',
      (stream: ServerHttp2Stream) => stream.respond(grpcHead(), { endStream: true }),
      [],
    ],
  ])(
    'ends a call whose upstream gave no status (%s) with INTERNAL, and logs it invalid with that status',
    async (_shape, answer, replies) => {
      const upstream = await startShapedGrpcUpstream(answer, defer);
      const gateway = await gatewayOver(upstream.url);
      const outcome = await clientOf(gateway).listHellos('ann', credentials());
      expect(outcome.replies).toEqual(replies);
      expect(outcome.status.code).toBe(status.INTERNAL);
      expect(outcome.status.details).toBe('Bad Gateway: the upstream ended the call without a grpc-status');
      await expect
        .poll(() => accessLines(gateway))
        .toMatchObject([{ status: 200, outcome: 'invalid', grpcStatus: status.INTERNAL }]);
      expect(gateway.logs.find((line) => line.level === 40)).toMatchObject({
        msg: 'the upstream ended a gRPC call without a grpc-status',
        outcome: 'invalid',
      });
    },
  );

  it('relays an upstream answer of another HTTP status as it is, and logs the status its client reads from it', async () => {
    const upstream = await startShapedGrpcUpstream(
      (stream) => stream.respond({ ':status': 503, 'content-type': 'text/plain' }, { endStream: true }),
      defer,
    );
    const gateway = await gatewayOver(upstream.url);
    const outcome = await clientOf(gateway).sayHello('ann', credentials());
    expect(outcome.status.code).toBe(status.UNAVAILABLE);
    expect(outcome.status.details).toBe('Received HTTP status code 503');
    await expect
      .poll(() => accessLines(gateway))
      .toMatchObject([{ status: 503, outcome: 'completed', grpcStatus: status.UNAVAILABLE }]);
  });

  it.each([
    ['CANCEL', http2.constants.NGHTTP2_CANCEL],
    ['INTERNAL_ERROR', http2.constants.NGHTTP2_INTERNAL_ERROR],
  ])(
    'ends a call whose upstream resets it (%s) mid-answer with UNAVAILABLE after what came, and logs it reset with that status',
    async (_name, code) => {
      const upstream = await startShapedGrpcUpstream((stream) => {
        // Waiting for trailers, the stream's end sends no END_STREAM: the reset is all the client gets.
        stream.respond(grpcHead(), { waitForTrailers: true });
        stream.write(helloMessage('Hello ann #1'), () => setImmediate(() => stream.close(code)));
      }, defer);
      const gateway = await gatewayOver(upstream.url);
      const outcome = await clientOf(gateway).listHellos('ann', credentials());
      expect(outcome.replies).toEqual([{ message: 'Hello ann #1' }]);
      expect(outcome.status.code).toBe(status.UNAVAILABLE);
      expect(outcome.status.details).toBe('Bad Gateway');
      await expect
        .poll(() => accessLines(gateway))
        .toMatchObject([{ status: 200, outcome: 'reset', grpcStatus: status.UNAVAILABLE }]);
    },
  );

  it('ends a streaming call whose upstream goes silent for proxyTimeout with DEADLINE_EXCEEDED, after what came', async () => {
    const silent = http2.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/grpc' });
      res.write(Buffer.from(sayHelloMessage('Hello ann #1'), 'latin1'));
    });
    // Its streams stay open: they end with its sessions, after the test.
    const sessions = new Set<http2.ServerHttp2Session>();
    silent.on('session', (session: http2.ServerHttp2Session) => sessions.add(session));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    defer(() => {
      silent.close();
      for (const session of sessions) session.destroy();
    });
    const gateway = await gatewayOver(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, {
      proxyTimeout: 300,
    });
    const outcome = await clientOf(gateway).listHellos('ann', credentials());
    expect(outcome.replies).toEqual([{ message: 'Hello ann #1' }]);
    expect(outcome.status.code).toBe(status.DEADLINE_EXCEEDED);
    expect(outcome.status.details).toBe('Gateway Timeout');
    await expect
      .poll(() => accessLines(gateway))
      .toMatchObject([{ status: 200, outcome: 'timeout', grpcStatus: status.DEADLINE_EXCEEDED }]);
  });
});

describe('grpc-timeout', () => {
  it('answers DEADLINE_EXCEEDED itself when the call passes its grpc-timeout upstream', async () => {
    const gateway = await gatewayOver(`http://${greeter().address}`);
    // Node's client sets no deadline of its own: the status can only be the gateway's.
    const answer = await rawSayHello(gateway, 'silent', { 'grpc-timeout': '200m' });
    expect(answer.status).toBe(200);
    expect(answer.headers['grpc-status']).toBe('4');
    expect(answer.headers['grpc-message']).toBe('Gateway Timeout');
    await expect
      .poll(() => accessLines(gateway))
      .toMatchObject([{ status: 504, outcome: 'timeout', grpcStatus: status.DEADLINE_EXCEEDED }]);
  });

  it('refuses a malformed grpc-timeout with INTERNAL before the upstream sees the call', async () => {
    const gateway = await gatewayOver(`http://${greeter().address}`);
    const before = greeter().calls.length;
    const answer = await rawSayHello(gateway, 'ann', { 'grpc-timeout': '1.5S' });
    expect(answer.headers['grpc-status']).toBe('13');
    expect(answer.headers['grpc-message']).toBe(
      'Bad Request: grpc-timeout must be 1 to 8 digits and a unit (H, M, S, m, u or n)',
    );
    expect(greeter().calls.length).toBe(before);
    await expect
      .poll(() => accessLines(gateway))
      .toMatchObject([{ status: 400, grpcStatus: status.INTERNAL }]);
  });

  it.each([' 1S', '1S ', '\t1S', '1S\t'])(
    'never sees a grpc-timeout padded with whitespace (%j): Node drops the field, and the call goes on without one',
    async (padded) => {
      const received: Array<string | string[] | undefined> = [];
      const upstream = await startShapedGrpcUpstream((stream, headers) => {
        received.push(headers['grpc-timeout']);
        stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
      }, defer);
      const gateway = await gatewayOver(upstream.url);
      const { host, port } = new URL(gateway.url);
      // Raw frames: the value goes on the wire exactly as written, as no gRPC library would write it.
      const raw = await openRawHttp2(Number(port));
      defer(() => raw.close());
      const call = (id: number, timeout: string) =>
        raw.send(
          headersFrame(
            id,
            requestFields(
              host,
              '/helloworld.Greeter/SayHello',
              [
                ['content-type', 'application/grpc'],
                ['te', 'trailers'],
                ['authorization', basicAuth(devKey)],
                ['grpc-timeout', timeout],
              ],
              'POST',
            ),
          ),
          dataFrame(id, sayHelloMessage('ann'), { endStream: true }),
        );
      call(1, padded);
      const answer = await raw.frame((sent) => sent.streamId === 1 && sent.type === frameType.headers);
      expect(statusOf(answer)).toBe(200);
      await expect
        .poll(() => accessLines(gateway))
        .toMatchObject([{ status: 200, outcome: 'completed', grpcStatus: status.OK }]);
      // The same value unpadded reaches the gateway, and goes upstream as it came.
      call(3, padded.trim());
      await raw.frame((sent) => sent.streamId === 3 && sent.type === frameType.headers);
      expect(received).toEqual([undefined, '1S']);
    },
  );

  it('leaves a call within its grpc-timeout alone', async () => {
    const gateway = await gatewayOver(`http://${greeter().address}`);
    const answer = await rawSayHello(gateway, 'ann', { 'grpc-timeout': '5S' });
    expect(answer.trailers['grpc-status']).toBe('0');
    expect(answer.body).toContain('Hello ann');
  });
});
