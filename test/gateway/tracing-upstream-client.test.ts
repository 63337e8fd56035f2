import * as undici from 'undici';
import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { startHoldingUpstream } from '../helpers/holding-upstream.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { poolConfig } from '../helpers/pool-gateways.js';
import { auth } from '../helpers/proxy-parts.js';
import { request } from '../helpers/raw-http.js';
import { accessLines, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { childrenOf, onlyOf, parentOf, spanKind } from '../helpers/trace-trees.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const defer = cleanupAfterEach();
const proxyTimeout = 60_000;

/** A gateway whose pets API has the pool `upstream`, tracing every exchange to a receiver of its own. */
async function tracedPool(upstream: Record<string, unknown>, clock?: FakeClock) {
  const receiver = await startOtlpReceiver();
  defer(() => receiver.close());
  const config = {
    ...poolConfig(upstream),
    proxyTimeout,
    tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 },
  };
  const gateway = await startTestGateway(config, {}, clock ? { timers: clock } : {});
  defer(() => gateway.close());
  return { gateway, receiver };
}

async function target(status = 200): Promise<TestUpstream> {
  const upstream = await startUpstream((_req, res) => res.writeHead(status).end(`answered ${status}`));
  defer(() => upstream.close());
  return upstream;
}

/** The server span of the gateway's last exchange, and the client spans under it, in the order they ended. */
async function clientSpansOf(gateway: TestGateway, receiver: OtlpReceiver) {
  await vi.waitFor(() => expect(accessLines(gateway).length).toBeGreaterThan(0));
  const { requestId } = accessLines(gateway).at(-1)!;
  let server: ReceivedSpan | undefined;
  while (!(server = receiver.spans.find((span) => span.attributes['quotagate.request_id'] === requestId)))
    await receiver.waitForSpans(receiver.spans.length + 1);
  // Under the server span: authentication, and the upstream's tries.
  const children = childrenOf(receiver.spans, server);
  const clients = children.filter((span) => span.kind === spanKind.client);
  expect(children.filter((span) => span.kind !== spanKind.client).map(({ name }) => name)).toEqual([
    'quotagate.authenticate',
  ]);
  return { server, clients };
}

describe('the upstream client spans of a pool', () => {
  it('makes a span of each try: a refused target, then the one that answered and that the upstream saw as its parent', async () => {
    const [dead, live] = [await target(), await target()];
    await dead.close();
    const { gateway, receiver } = await tracedPool({ targets: [dead.url, live.url] });
    expect((await request(gateway.url, { path: '/pets/1', headers: auth })).status).toBe(200);
    const { server, clients } = await clientSpansOf(gateway, receiver);
    expect(clients).toHaveLength(2);
    const [first, second] = clients as [ReceivedSpan, ReceivedSpan];
    expect(first.status.code).toBe(2);
    expect(first.attributes).toMatchObject({
      'url.full': `${dead.url}/1`,
      'quotagate.upstream.target': dead.url,
      'quotagate.upstream.outcome': 'unreachable',
      'error.type': 'ECONNREFUSED',
    });
    expect(first.attributes['http.response.status_code']).toBeUndefined();
    expect(first.attributes['http.request.resend_count']).toBeUndefined();
    expect(second.status.code).toBe(0);
    expect(second.attributes).toMatchObject({
      'url.full': `${live.url}/1`,
      'http.response.status_code': 200,
      'http.request.resend_count': 1,
      'quotagate.upstream.target': live.url,
      'quotagate.upstream.outcome': 'completed',
    });
    // Each try carried its own span: the upstream that answered names the second.
    expect(parentOf(live.requests.at(-1)!.headers.traceparent as string)).toBe(second.spanId);
    expect(live.requests.at(-1)!.headers.host).toBe(new URL(live.url).host);
    expect(server.attributes['quotagate.upstream.target']).toBe(live.url);
  });

  it('ends the span of an answer set aside (503) with its status, and the retry in one of its own', async () => {
    const [down, live] = [await target(503), await target()];
    const { gateway, receiver } = await tracedPool({ targets: [down.url, live.url] });
    expect((await request(gateway.url, { path: '/pets/2', headers: auth })).status).toBe(200);
    const { clients } = await clientSpansOf(gateway, receiver);
    expect(clients.map((span) => span.attributes['http.response.status_code'])).toEqual([503, 200]);
    expect(clients.map((span) => span.status.code)).toEqual([2, 0]);
    expect(clients[0]!.attributes['error.type']).toBe('503');
    expect(parentOf(down.requests.at(-1)!.headers.traceparent as string)).toBe(clients[0]!.spanId);
    expect(parentOf(live.requests.at(-1)!.headers.traceparent as string)).toBe(clients[1]!.spanId);
    // One traceparent each: a retry's replaces the try's before it.
    expect(live.requests.at(-1)!.rawHeaders.filter((name) => name === 'traceparent')).toHaveLength(1);
  });

  it('fails the client span of an upstream that times out (504), once', async () => {
    const clock = new FakeClock();
    const hung = await startHoldingUpstream();
    defer(() => hung.close());
    const { gateway, receiver } = await tracedPool({ targets: [hung.url] }, clock);
    const answer = request(gateway.url, { path: '/pets/3', headers: auth });
    await vi.waitFor(() => expect(hung.held()).toBe(1));
    await clock.advance(proxyTimeout);
    expect((await answer).status).toBe(504);
    const { server, clients } = await clientSpansOf(gateway, receiver);
    expect(clients).toHaveLength(1);
    expect(clients[0]!.status.code).toBe(2);
    expect(clients[0]!.attributes).toMatchObject({
      'quotagate.upstream.outcome': 'timeout',
      'error.type': 'UND_ERR_HEADERS_TIMEOUT',
    });
    expect(server.attributes['http.response.status_code']).toBe(504);
    expect(server.status.code).toBe(2);
  });

  it('ends the client span of a client that left while the upstream held its answer, not failed', async () => {
    const hung = await startHoldingUpstream();
    defer(() => hung.close());
    const { gateway, receiver } = await tracedPool({ targets: [hung.url] });
    const controller = new AbortController();
    const answer = undici.request(`${gateway.url}/pets/4`, { headers: auth, signal: controller.signal });
    await vi.waitFor(() => expect(hung.held()).toBe(1));
    controller.abort();
    await expect(answer).rejects.toThrow();
    const { server, clients } = await clientSpansOf(gateway, receiver);
    expect(clients).toHaveLength(1);
    expect(clients[0]!.status.code).toBe(0);
    expect(clients[0]!.attributes['quotagate.upstream.outcome']).toBe('client_aborted');
    expect(server.attributes['http.response.status_code']).toBe(499);
    // Nothing ends twice: no span of the exchange came again.
    await gateway.close();
    expect(receiver.spans.filter((span) => span.spanId === clients[0]!.spanId)).toHaveLength(1);
    expect(onlyOf(receiver.spans, spanKind.server).spanId).toBe(server.spanId);
  });
});
