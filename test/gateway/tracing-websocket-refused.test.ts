import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { freePort } from '../helpers/free-port.js';
import { serverKind } from '../helpers/otlp-receiver.js';
import { accessLines, basicAuth, devKey, petsConfig } from '../helpers/test-gateway.js';
import { endedOnce, startTracedGateway, type TracedGateway } from '../helpers/traced-endings.js';
import { spanKind } from '../helpers/trace-trees.js';
import { mustRefuse, startWebSocketUpstream, wsUrl } from '../helpers/websockets.js';

/**
 * A WebSocket opening its upstream does not take (it answers 403, or nothing listens): the server span
 * and the opening's client span each end once, with the status; one span per access line.
 */
const defer = cleanupAfterEach();

/** Opens a WebSocket tagged `id` through `traced`, which must be refused with `status`. */
async function refusedOpening(traced: TracedGateway, id: string, status: number) {
  const refused = await mustRefuse(wsUrl(traced.gateway.url, '/pets/1'), {
    authorization: basicAuth(devKey),
    'x-request-id': id,
  });
  expect(refused.status).toBe(status);
  const { line, span } = (await endedOnce(traced, [id])).get(id)!;
  const { spans } = traced.receiver;
  // One server span in all, as there is one access line.
  expect(spans.filter((one) => one.kind === serverKind)).toHaveLength(accessLines(traced.gateway).length);
  const clients = spans.filter((one) => one.traceId === span.traceId && one.kind === spanKind.client);
  expect(clients).toHaveLength(1);
  expect(clients[0]!.parentSpanId).toBe(span.spanId);
  return { line, span, client: clients[0]! };
}

describe('the spans of a WebSocket opening its upstream refuses', () => {
  it('end once each with the upstream 403, which the client is given', async () => {
    const upstream = await startWebSocketUpstream();
    defer(() => upstream.close());
    // Every upgrade to a path under /refused is answered 403 with a body.
    const traced = await startTracedGateway(petsConfig(`${upstream.url}/refused`), defer);
    const { line, span, client } = await refusedOpening(traced, 'upstream-403', 403);
    expect(upstream.upgrades).toHaveLength(1);
    expect(line).toMatchObject({ status: 403 });
    expect(span).toMatchObject({ status: { code: 0 } });
    expect(span.attributes).toMatchObject({
      'http.response.status_code': 403,
      'quotagate.form': 'opening',
      // The upstream answered: the gateway refused nothing of its own.
      'quotagate.decision': 'admitted',
    });
    expect(span.attributes['quotagate.refusal.code']).toBeUndefined();
    // A WebSocket never opened: no way it closed.
    expect(span.attributes['quotagate.websocket']).toBeUndefined();
    expect(client).toMatchObject({ name: 'GET', status: { code: 2 } });
    expect(client.attributes).toMatchObject({
      'http.response.status_code': 403,
      'error.type': '403',
    });
  });

  it('end once each when nothing listens at the upstream: 502, the try unreachable', async () => {
    const port = await freePort();
    const traced = await startTracedGateway(petsConfig(`http://127.0.0.1:${port}`), defer);
    const { line, span, client } = await refusedOpening(traced, 'upstream-down', 502);
    expect(line).toMatchObject({ status: 502, outcome: 'unreachable' });
    expect(span).toMatchObject({ status: { code: 2 } });
    expect(span.attributes).toMatchObject({
      'http.response.status_code': 502,
      'error.type': '502',
      'quotagate.form': 'opening',
      'quotagate.upstream.outcome': 'unreachable',
    });
    expect(span.attributes['quotagate.websocket']).toBeUndefined();
    expect(client).toMatchObject({ name: 'GET', status: { code: 2 } });
    expect(client.attributes).toMatchObject({
      'quotagate.upstream.outcome': 'unreachable',
      'error.type': 'ECONNREFUSED',
    });
    expect(client.attributes['http.response.status_code']).toBeUndefined();
  });
});
