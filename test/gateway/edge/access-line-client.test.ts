import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { credentials, withKey } from '../../helpers/grpc-credentials.js';
import { greeterApi, greeterClient, startGreeterUpstream } from '../../helpers/grpc-greeter.js';
import { http2Fetch } from '../../helpers/http2-client.js';
import { useSuiteUpstream } from '../../helpers/suite-upstream.js';
import { accessLines, petsConfig, startTestGateway, type TestGateway } from '../../helpers/test-gateway.js';
import { mustRefuse, startWebSocketUpstream, wsUrl } from '../../helpers/websockets.js';

/**
 * Issue 42, point 15: the access line's `client` is the address the request came from, whatever the
 * protocol, though the socket has gone by the time the line is written (an HTTP/2 stream's, a refused
 * WebSocket handshake's). The count by client address already had it; the line lost it.
 */
const defer = cleanupAfterEach();
const websockets = useSuiteUpstream(() => startWebSocketUpstream());
const greeter = useSuiteUpstream(() => startGreeterUpstream());

async function gatewayWith(overrides: Record<string, unknown> = {}): Promise<TestGateway> {
  const config = petsConfig(websockets().url, overrides);
  config.apis = [...(config.apis as unknown[]), greeterApi(`http://${greeter().address}`)];
  const gateway = await startTestGateway(config);
  defer(() => gateway.close());
  return gateway;
}

/** The access line of the request that `requestId` tagged, once it is written. */
async function lineOf(gateway: TestGateway, requestId: string): Promise<Record<string, unknown>> {
  const found = () => accessLines(gateway).find((line) => line.requestId === requestId);
  await expect.poll(found).toBeDefined();
  return found()!;
}

/** The access line of the one request of `gateway` to `path`, once it is written. */
async function onlyLineTo(gateway: TestGateway, path: string): Promise<Record<string, unknown>> {
  await expect.poll(() => accessLines(gateway).filter((line) => line.path === path)).toHaveLength(1);
  return accessLines(gateway).find((line) => line.path === path)!;
}

describe('the access line of an HTTP/2 request', () => {
  it('names the client of a stream over h2c', async () => {
    const gateway = await gatewayWith();
    const answer = await http2Fetch(gateway.url, {
      path: '/pets/1',
      headers: { ...withKey, 'x-request-id': 'h2-plain' },
    });
    expect(answer.status).toBe(200);
    expect(await lineOf(gateway, 'h2-plain')).toMatchObject({ protocol: 'HTTP/2', client: '127.0.0.1' });
  });

  it('names the client of a gRPC call', async () => {
    const gateway = await gatewayWith();
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    const metadata = credentials();
    metadata.set('x-request-id', 'grpc-call');
    expect((await client.sayHello('ann', metadata)).status.code).toBe(status.OK);
    expect(await lineOf(gateway, 'grpc-call')).toMatchObject({ protocol: 'HTTP/2', client: '127.0.0.1' });
  });

  it('names the address a trusted proxy forwarded for, over HTTP/2 as over HTTP/1.1', async () => {
    const gateway = await gatewayWith({ trustProxy: ['127.0.0.1'] });
    await http2Fetch(gateway.url, {
      path: '/pets/1',
      headers: { ...withKey, 'x-forwarded-for': '198.51.100.7', 'x-request-id': 'h2-forwarded' },
    });
    expect(await lineOf(gateway, 'h2-forwarded')).toMatchObject({ client: '198.51.100.7' });
  });
});

describe('the access line of a refused WebSocket handshake', () => {
  it('names the client when the gateway refuses it (401)', async () => {
    const gateway = await gatewayWith();
    expect((await mustRefuse(wsUrl(gateway.url, '/pets/1'))).status).toBe(401);
    expect(await onlyLineTo(gateway, '/pets/1')).toMatchObject({ status: 401, client: '127.0.0.1' });
  });

  it('names the client when the upstream refuses it (403)', async () => {
    const gateway = await gatewayWith();
    expect((await mustRefuse(wsUrl(gateway.url, '/pets/refused'), withKey)).status).toBe(403);
    expect(await onlyLineTo(gateway, '/pets/refused')).toMatchObject({ status: 403, client: '127.0.0.1' });
  });
});
