import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { request } from '../helpers/raw-http.js';
import { accessLines, petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { traceOf } from '../helpers/trace-trees.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

let receiver: OtlpReceiver;
let upstream: TestUpstream;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream();
});
afterAll(async () => {
  await upstream?.close();
  await receiver?.close();
});

const gateways: TestGateway[] = [];
afterEach(async () => {
  for (const gateway of gateways.splice(0)) await gateway.close();
});

async function pluginGateway(plugin: string, extra: Record<string, unknown> = {}): Promise<TestGateway> {
  const gateway = await startTestGateway(
    petsConfig(upstream.url, {
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: plugin,
      tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 },
      ...extra,
    }),
  );
  gateways.push(gateway);
  return gateway;
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** The authentication span of the trace `traceId`, once exported. */
async function authenticationOf(traceId: string): Promise<ReceivedSpan> {
  for (;;) {
    const found = receiver.spans.find(
      (span) => span.traceId === traceId && span.name === 'quotagate.authenticate',
    );
    if (found) return found;
    await receiver.waitForSpans(receiver.spans.length + 1);
  }
}

describe('the authentication span ends on every way out of the step', () => {
  it('ends when a scheme answers after the client left, marked late, under the 499 server span', async () => {
    const held: Array<() => void> = [];
    (globalThis as { quotagateHeld?: Array<() => void> }).quotagateHeld = held;
    const gateway = await pluginGateway('./test/fixtures/plugins/held-plugin.js');
    const client = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
    client.write('GET /pets/7 HTTP/1.1\r\nHost: gw\r\nX-Hold: 1\r\n\r\n');
    while (held.length === 0) await nextTurn();
    client.destroy();
    while (accessLines(gateway).length === 0) await nextTurn();
    const trace = await traceOf(gateway, receiver, 499);
    expect(trace.server.attributes['quotagate.decision']).toBe('client_left');
    held[0]!();
    const authenticate = await authenticationOf(trace.server.traceId);
    expect(authenticate).toMatchObject({
      parentSpanId: trace.server.spanId,
      status: { code: 0 },
      attributes: {
        'quotagate.auth.scheme': 'plugin',
        'quotagate.auth.outcome': 'admitted',
        'quotagate.auth.late': true,
      },
    });
  });

  it('marks a plugin that threw failed, as the 500 it answers', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/throwing-plugin.js');
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(500);
    const trace = await traceOf(gateway, receiver, 500);
    expect(trace.server.status.code).toBe(2);
    expect(trace.one('quotagate.authenticate')).toMatchObject({
      status: { code: 2 },
      attributes: { 'quotagate.auth.outcome': 'failed', 'error.type': 'internal_error' },
    });
  });

  it('marks a plugin that did not decide within pluginTimeout unavailable, as the 503 it answers', async () => {
    const gateway = await pluginGateway('./test/fixtures/plugins/silent-plugin.js', { pluginTimeout: 100 });
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(503);
    const trace = await traceOf(gateway, receiver, 503);
    const authenticate = trace.one('quotagate.authenticate');
    expect(authenticate).toMatchObject({
      status: { code: 2 },
      attributes: { 'quotagate.auth.outcome': 'unavailable', 'error.type': 'service_unavailable' },
    });
    expect(authenticate.attributes['quotagate.auth.late']).toBeUndefined();
  });

  it("says a plugin's no is its refusal", async () => {
    const gateway = await pluginGateway('./examples/plugins/x-secret.js', {
      secret: 'a-long-secret-0123456789',
    });
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(401);
    const trace = await traceOf(gateway, receiver, 401);
    expect(trace.one('quotagate.authenticate').attributes).toMatchObject({
      'quotagate.auth.outcome': 'refused',
      'quotagate.auth.refusal': 'plugin_refused',
    });
  });
});
