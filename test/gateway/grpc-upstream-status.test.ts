import http2, { type ServerHttp2Stream } from 'node:http2';
import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { greeterApi, greeterClient } from '../helpers/grpc-greeter.js';
import { credentials } from '../helpers/grpc-credentials.js';
import {
  grpcHead,
  helloMessage,
  startShapedGrpcUpstream,
  type ShapedGrpcUpstream,
} from '../helpers/shaped-grpc-upstream.js';
import { http2Session } from '../helpers/http2-client.js';
import {
  accessLines,
  basicAuth,
  concurrency,
  devKey,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';

/**
 * Whose word is a gRPC call's status (issue 42, point 2): a `grpc-status` in the upstream's head is a
 * trailers-only answer only when nothing follows it; when trailers follow, they say the status, as
 * they do to a client calling the upstream directly.
 */
const defer = cleanupAfterEach();

async function gatewayOver(
  upstream: ShapedGrpcUpstream,
  overrides: Record<string, unknown> = {},
): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig('http://127.0.0.1:9', { apis: [greeterApi(upstream.url)], ...overrides }),
  );
  defer(() => gateway.close());
  return gateway;
}

const clientOf = (address: string) => {
  const client = greeterClient(address);
  defer(() => client.close());
  return client;
};
const gatewayClient = (gateway: TestGateway) => clientOf(new URL(gateway.url).host);

/** Answers with `head` (not ending the stream), then `messages`, then `trailers`, which end it. */
const answerWith =
  (head: Record<string, string>, messages: Buffer[], trailers: Record<string, string>) =>
  (stream: ServerHttp2Stream) => {
    stream.respond(grpcHead(head), { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers(trailers));
    for (const message of messages) stream.write(message);
    stream.end();
  };

describe("a grpc-status in the upstream's head", () => {
  it('is not the status when trailers follow: they are, as a direct call reads them', async () => {
    const upstream = await startShapedGrpcUpstream(
      answerWith({ 'grpc-status': '0', 'x-head': 'head' }, [], {
        'grpc-status': '7',
        'grpc-message': 'denied',
        'x-trailer': 'trailer',
      }),
      defer,
    );
    const direct = await clientOf(upstream.address).listHellos('ann');
    expect(direct.status.code).toBe(status.PERMISSION_DENIED);
    const gateway = await gatewayOver(upstream);
    const outcome = await gatewayClient(gateway).listHellos('ann', credentials());
    expect(outcome.status.code).toBe(status.PERMISSION_DENIED);
    expect(outcome.status.details).toBe('denied');
    expect(outcome.status.metadata.get('x-trailer')).toEqual(['trailer']);
    expect(outcome.headers?.get('x-head')).toEqual(['head']);
    // The head's status is not relayed as metadata a client could take for the call's.
    expect(outcome.headers?.get('grpc-status')).toEqual([]);
    await expect
      .poll(() => accessLines(gateway))
      .toMatchObject([{ status: 200, outcome: 'completed', grpcStatus: status.PERMISSION_DENIED }]);
  });

  it('is not the status when a message follows: the message reaches the client, then the trailers', async () => {
    // Larger than a stream's write buffer: written while the head was held, its write returned false.
    const reply = 'x'.repeat(100_000);
    const upstream = await startShapedGrpcUpstream(
      answerWith({ 'grpc-status': '0' }, [helloMessage(reply)], {
        'grpc-status': '7',
        'grpc-message': 'denied',
      }),
      defer,
    );
    const direct = await clientOf(upstream.address).listHellos('ann');
    expect(direct.status.code).toBe(status.PERMISSION_DENIED);
    expect(direct.replies).toEqual([{ message: reply }]);
    const gateway = await gatewayOver(upstream, { proxyTimeout: 300 });
    await setQuota(gateway, { type: 'API', name: 'System', restrictions: [concurrency(1)] }, systemQuotaId);
    const client = gatewayClient(gateway);
    const outcome = await client.listHellos('ann', credentials());
    expect(outcome.replies).toEqual([{ message: reply }]);
    expect(outcome.status.code).toBe(status.PERMISSION_DENIED);
    expect(outcome.status.details).toBe('denied');
    // The call is over: its upstream stream closed, and its slot is free for the next call.
    await upstream.closedStreams(2);
    await expect.poll(() => accessLines(gateway)).toHaveLength(1);
    expect((await client.listHellos('bob', credentials())).status.code).toBe(status.PERMISSION_DENIED);
    await expect.poll(() => accessLines(gateway)).toHaveLength(2);
  });

  it('is the status of a head that ends the stream: a trailers-only answer stays one', async () => {
    const upstream = await startShapedGrpcUpstream(
      (stream) =>
        stream.respond(grpcHead({ 'grpc-status': '5', 'grpc-message': 'gone', 'x-served-by': 'shaped' }), {
          endStream: true,
        }),
      defer,
    );
    const gateway = await gatewayOver(upstream);
    const outcome = await gatewayClient(gateway).listHellos('ann', credentials());
    expect(outcome.status.code).toBe(status.NOT_FOUND);
    expect(outcome.status.details).toBe('gone');
    expect(outcome.status.metadata.get('x-served-by')).toEqual(['shaped']);
    // One HEADERS frame that ends the stream: the client had no header metadata before the status.
    expect(outcome.headers).toBeNull();
  });
});

describe('a call whose client stops reading', () => {
  it('ends once nothing has passed for proxyTimeout: its upstream stream closes, its slot is freed, one line', async () => {
    // ListHellos: messages as fast as the gateway takes them, and no end; SayHello: OK at once.
    const upstream = await startShapedGrpcUpstream((stream, headers) => {
      if (headers[':path'] === '/helloworld.Greeter/SayHello') {
        stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
        return;
      }
      stream.respond(grpcHead());
      const message = helloMessage('y'.repeat(60_000));
      const more = () => {
        while (!stream.destroyed && stream.write(message));
      };
      stream.on('drain', more);
      more();
    }, defer);
    const gateway = await gatewayOver(upstream, { proxyTimeout: 300 });
    await setQuota(gateway, { type: 'API', name: 'System', restrictions: [concurrency(1)] }, systemQuotaId);
    const session = await http2Session(gateway.url);
    defer(() => session.destroy());
    const stream = session.request({
      ':method': 'POST',
      ':path': '/helloworld.Greeter/ListHellos',
      'content-type': 'application/grpc',
      te: 'trailers',
      authorization: basicAuth(devKey),
    });
    stream.end(helloMessage('ann'));
    // The client never reads: the gateway's writes fill the stream's window and stop.
    stream.pause();
    const reset = new Promise<number>((resolve) => stream.once('close', () => resolve(stream.rstCode!)));
    await upstream.closedStreams(1);
    // Its status cannot reach a client that reads nothing: its stream is reset.
    expect(await reset).toBe(http2.constants.NGHTTP2_CANCEL);
    await expect
      .poll(() => accessLines(gateway))
      .toMatchObject([{ status: 200, outcome: 'timeout', grpcStatus: status.CANCELLED }]);
    expect((await gatewayClient(gateway).sayHello('bob', credentials())).status.code).toBe(status.OK);
  });
});
