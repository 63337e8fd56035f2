import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { spanKind } from '../helpers/trace-trees.js';
import {
  accessLines,
  basicAuth,
  devKey,
  mb,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const clientTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
const clientSpan = '00f067aa0ba902b7';
const traceparent = `00-${clientTrace}-${clientSpan}-01`;
const server = 2;

let receiver: OtlpReceiver;
let upstream: TestUpstream;
let gateway: TestGateway;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream();
  gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, {
      tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10, serviceName: 'edge' },
    }),
  );
  await setQuota(
    gateway,
    { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'hour')] },
    systemQuotaId,
  );
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
  await receiver.close();
});

/** A GET through the gateway, with the fields given (a flat list: a field may come twice). */
async function get(path: string, fields: string[] = []) {
  const res = await request(`${gateway.url}${path}`, {
    headers: ['authorization', basicAuth(devKey), ...fields],
  });
  await res.body.dump();
  return res;
}

/** The server span of the exchange whose access line has `requestId`, once it was exported. */
async function spanOf(status: number): Promise<ReceivedSpan> {
  const line = accessLines(gateway).findLast((entry) => entry.status === status)!;
  const requestId = line.requestId as string;
  for (;;) {
    const found = receiver.spans.find((span) => span.attributes['quotagate.request_id'] === requestId);
    if (found) {
      expect(found.traceId).toBe(line.traceId);
      return found;
    }
    await receiver.waitForSpans(receiver.spans.length + 1);
  }
}

describe('the server span of each exchange', () => {
  it('continues the client trace, names the catalog method and says what the gateway decided', async () => {
    const res = await get('/pets/42?api_key=secret', ['traceparent', traceparent, 'baggage', 'tenant=a%20b']);
    expect(res.statusCode).toBe(200);
    const span = await spanOf(200);
    expect(span).toMatchObject({
      traceId: clientTrace,
      parentSpanId: clientSpan,
      name: 'GET /pets/{petId}',
      kind: server,
      status: { code: 0 },
      resource: { 'service.name': 'edge' },
    });
    expect(span.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': '/pets/{petId}',
      'http.response.status_code': 200,
      'network.protocol.version': '1.1',
      'url.path': '/pets/42',
      'quotagate.api': 'Pet Store',
      'quotagate.method': 'getPet',
      'quotagate.application': 'project',
      'quotagate.decision': 'admitted',
      'quotagate.quota': 'allowed',
      'quotagate.upstream.outcome': 'completed',
      'quotagate.ratelimit.policy': `"${systemQuotaId}/0";q=3;w=3600`,
    });
    expect(span.attributes['quotagate.ratelimit']).toMatch(new RegExp(`^"${systemQuotaId}/0";r=2;t=\\d+$`));
    // No query string (it may carry a key) anywhere in the span.
    expect(JSON.stringify(span)).not.toContain('secret');
    // The upstream's parent is the gateway's client span, under its server span; the client's baggage
    // goes on as it came.
    const seen = upstream.requests.at(-1)!.headers;
    const client = receiver.spans.find(
      (child) => child.parentSpanId === span.spanId && child.kind === spanKind.client,
    )!;
    expect(seen.traceparent).toBe(`00-${clientTrace}-${client.spanId}-01`);
    expect(seen.baggage).toBe('tenant=a%20b');
  });

  it('ends a 401 with its status and reason, its span status left unset (a 4xx of a server)', async () => {
    const res = await request(`${gateway.url}/pets/1`, { headers: { traceparent } });
    await res.body.dump();
    expect(res.statusCode).toBe(401);
    const span = await spanOf(401);
    expect(span.parentSpanId).toBe(clientSpan);
    expect(span.status.code).toBe(0);
    expect(span.attributes).toMatchObject({
      'http.response.status_code': 401,
      'quotagate.decision': 'refused',
      'quotagate.refusal.code': 'unauthorized',
    });
    expect(span.events.map((event) => event.name)).toEqual(['quotagate.refused']);
  });

  it('ends a 429 with the restriction that refused it and no room left', async () => {
    let status = 0;
    while (status !== 429) status = (await get('/pets/7')).statusCode;
    const span = await spanOf(429);
    expect(span.attributes).toMatchObject({
      'http.response.status_code': 429,
      'quotagate.decision': 'refused',
      'quotagate.refusal.code': 'quota_exceeded',
      'quotagate.quota': 'rejected',
      'quotagate.refused_by': `${systemQuotaId}/0`,
    });
    expect(span.attributes['quotagate.ratelimit']).toMatch(/;r=0;/);
    expect(span.events[0]).toEqual({
      name: 'quotagate.refused',
      attributes: { 'quotagate.refusal.code': 'quota_exceeded' },
    });
  });

  it('ends a 413 with the restriction its body is too large for, and no upstream try', async () => {
    const bytesGateway = await startTestGateway(
      petsConfig(`${upstream.url}/pets`, {
        tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 },
      }),
    );
    try {
      await setQuota(
        bytesGateway,
        { type: 'API', name: 'System', restrictions: [mb(0.001, 1, 'minute')] },
        systemQuotaId,
      );
      const res = await request(`${bytesGateway.url}/pets`, {
        method: 'POST',
        headers: { authorization: basicAuth(devKey), 'content-type': 'text/plain' },
        body: 'x'.repeat(2_000),
      });
      await res.body.dump();
      expect(res.statusCode).toBe(413);
      const line = accessLines(bytesGateway).find((entry) => entry.status === 413)!;
      let span: ReceivedSpan | undefined;
      while (
        !(span = receiver.spans.find((each) => each.attributes['quotagate.request_id'] === line.requestId))
      )
        await receiver.waitForSpans(receiver.spans.length + 1);
      expect(span.traceId).toBe(line.traceId);
      expect(span.status.code).toBe(0);
      expect(span.attributes).toMatchObject({
        'http.response.status_code': 413,
        'quotagate.decision': 'refused',
        'quotagate.refusal.code': 'payload_too_large',
        'quotagate.refused_by': `${systemQuotaId}/0`,
      });
      expect(line.refusedBy).toBe(`${systemQuotaId}/0`);

      expect(span.events.map((event) => event.name)).toEqual(['quotagate.refused']);
      const children = receiver.spans.filter((child) => child.parentSpanId === span.spanId);
      expect(children.some((child) => child.kind === spanKind.client)).toBe(false);
    } finally {
      await bytesGateway.close();
    }
  });

  it('says the gateway answered a read of the usage path itself, neither admitted nor refused', async () => {
    expect((await get('/_quotagate/usage')).statusCode).toBe(200);
    const span = await spanOf(200);
    expect(span.name).toBe('GET');
    expect(span.attributes['quotagate.decision']).toBe('answered');
    expect(span.attributes['quotagate.refusal.code']).toBeUndefined();
  });

  it('names an unrouted request by its method alone, and an unknown method HTTP', async () => {
    const res = await request(`${gateway.url}/nowhere`, { method: 'PURGE' as 'GET' });
    await res.body.dump();
    const span = await spanOf(res.statusCode);
    expect(span.name).toBe('HTTP');
    expect(span.attributes).toMatchObject({
      'http.request.method': '_OTHER',
      'http.request.method_original': 'PURGE',
    });
    expect(span.attributes['http.route']).toBeUndefined();
  });
});
