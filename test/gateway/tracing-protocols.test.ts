import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { greeterApi, greeterClient, startGreeterUpstream } from '../helpers/grpc-greeter.js';
import { credentials } from '../helpers/grpc-credentials.js';
import { startOtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { onlyOf, parentOf, spanKind } from '../helpers/trace-trees.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { closed, echo, mustOpen, startWebSocketUpstream, wsUrl } from '../helpers/websockets.js';

const defer = cleanupAfterEach();
const greeter = useSuiteUpstream(() => startGreeterUpstream());
const sockets = useSuiteUpstream(() => startWebSocketUpstream());

const clientTrace = '0af7651916cd43dd8448eb211c80319c';
const clientSpan = 'b7ad6b7169203331';
const traceparent = `00-${clientTrace}-${clientSpan}-01`;

async function tracedGateway(upstream: string, overrides: Record<string, unknown> = {}) {
  const receiver = await startOtlpReceiver();
  defer(() => receiver.close());
  const gateway: TestGateway = await startTestGateway(
    petsConfig(upstream, {
      tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 },
      ...overrides,
    }),
  );
  defer(() => gateway.close());
  return { gateway, receiver };
}

describe('the server span of a WebSocket and of a gRPC call', () => {
  it('spans a WebSocket from its opening to its close, with the frame bytes each way', async () => {
    const { gateway, receiver } = await tracedGateway(`${sockets().url}/pets`);
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/9'), {
      authorization: basicAuth(devKey),
      traceparent,
    });
    expect(await echo(ws, 'hello')).toBe('hello');
    const ended = closed(ws);
    ws.close(1000);
    await ended;
    const [span] = (await receiver.waitForServerSpans(1)) as [ReceivedSpan];
    const spans = receiver.spans;
    expect(span).toMatchObject({ traceId: clientTrace, parentSpanId: clientSpan, name: 'GET /pets/{petId}' });
    expect(span.attributes).toMatchObject({
      'http.response.status_code': 101,
      'quotagate.form': 'opening',
      'quotagate.websocket': 'closed',
      'quotagate.decision': 'admitted',
    });
    expect(span.attributes['http.request.body.size']).toBeGreaterThan(0);
    expect(span.attributes['http.response.body.size']).toBeGreaterThan(0);
    // The opening's client span ends with the upstream's 101, and is the parent the upstream saw.
    const client = onlyOf(spans, spanKind.client);
    expect(client).toMatchObject({ parentSpanId: span.spanId, name: 'GET', status: { code: 0 } });
    expect(client.attributes).toMatchObject({
      'http.response.status_code': 101,
      'quotagate.upstream.outcome': 'completed',
    });
    expect(parentOf(sockets().upgrades.at(-1)!.headers.traceparent as string)).toBe(client.spanId);
  });

  it('spans a gRPC call with its status, the upstream its child by its metadata', async () => {
    const { gateway, receiver } = await tracedGateway('http://127.0.0.1:9', {
      apis: [greeterApi(`http://${greeter().address}`)],
    });
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    const metadata = credentials();
    metadata.set('traceparent', traceparent);
    expect((await client.sayHello('ann', metadata)).status.code).toBe(status.OK);
    const [span] = (await receiver.waitForServerSpans(1)) as [ReceivedSpan];
    const spans = receiver.spans;
    expect(span).toMatchObject({ traceId: clientTrace, parentSpanId: clientSpan });
    expect(span.name).toMatch(/^POST \/.*SayHello$/);
    expect(span.attributes).toMatchObject({
      'network.protocol.version': '2',
      'rpc.system': 'grpc',
      'rpc.grpc.status_code': status.OK,
      'quotagate.form': 'call',
    });
    // The upstream call is a client span of the RPC conventions, with the status the upstream gave.
    const call = onlyOf(spans, spanKind.client);
    expect(call.parentSpanId).toBe(span.spanId);
    expect(call.name).toMatch(/^[\w.]+\/SayHello$/);
    expect(call.status.code).toBe(0);
    expect(call.attributes).toMatchObject({
      'rpc.system': 'grpc',
      'rpc.method': 'SayHello',
      'rpc.grpc.status_code': status.OK,
      'http.response.status_code': 200,
      'server.address': '127.0.0.1',
      'quotagate.upstream.outcome': 'completed',
    });
    expect(call.attributes['rpc.service']).toBe(call.name.split('/')[0]);
    expect(greeter().calls.at(-1)!.get('traceparent')).toEqual([`00-${clientTrace}-${call.spanId}-01`]);
  });

  it("fails the client span of a call its upstream ended NOT_FOUND, with the upstream's status", async () => {
    const { gateway, receiver } = await tracedGateway('http://127.0.0.1:9', {
      apis: [greeterApi(`http://${greeter().address}`)],
    });
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    expect((await client.sayHello('missing', credentials())).status.code).toBe(status.NOT_FOUND);
    const [span] = (await receiver.waitForServerSpans(1)) as [ReceivedSpan];
    const call = onlyOf(receiver.spans, spanKind.client);
    expect(call.parentSpanId).toBe(span.spanId);
    expect(call.status.code).toBe(2);
    expect(call.attributes).toMatchObject({
      'http.response.status_code': 200,
      'rpc.grpc.status_code': status.NOT_FOUND,
      'error.type': String(status.NOT_FOUND),
      'quotagate.upstream.outcome': 'completed',
    });
  });
});
