import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore } from '../helpers/enforcement-gateways.js';
import { greeterApi, greeterClient, startGreeterUpstream } from '../helpers/grpc-greeter.js';
import { http2Request, http2Session } from '../helpers/http2-client.js';
import { request } from '../helpers/raw-http.js';
import {
  concurrency,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { mustRefuse, wsUrl } from '../helpers/websockets.js';
import { credentials, withKey } from '../helpers/grpc-credentials.js';
import { useEventStreamUpstream } from '../helpers/event-stream-upstream.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

/**
 * Where the protocols of issue 32 meet: one `concurrency` restriction held by an HTTP/2 stream and a
 * gRPC streaming call alike, and a gRPC API asked for over HTTP/1.1 (a plain request, a WebSocket
 * upgrade) or a plain API sent `application/grpc` over HTTP/1.1.
 */
const defer = cleanupAfterEach();
/** The event streams the upstream holds open (`/pets/stream`) until the test ends them. */
const { upstream, streams } = useEventStreamUpstream('data: open\n\n');
const greeter = useSuiteUpstream(() => startGreeterUpstream());

async function gatewayWith(overrides: Record<string, unknown> = {}): Promise<TestGateway> {
  const pets = petsConfig(upstream().url).apis as object[];
  const gateway = await startTestGateway(
    petsConfig(upstream().url, { apis: [...pets, greeterApi(`http://${greeter().address}`)], ...overrides }),
  );
  defer(() => gateway.close());
  defer(() => streams.splice(0).forEach((stream) => stream.destroy()));
  return gateway;
}

const clientOf = (gateway: TestGateway) => {
  const client = greeterClient(new URL(gateway.url).host);
  defer(() => client.close());
  return client;
};

describe.each(eachStore)('one concurrency restriction across protocols, on %s', (_name, store) => {
  it('holds a gRPC streaming call its slot while it is open: the next call is RESOURCE_EXHAUSTED with RateLimit and Retry-After in its trailers', async () => {
    const gateway = await gatewayWith(store());
    await setQuota(gateway, { type: 'API', name: 'System', restrictions: [concurrency(1)] }, systemQuotaId);
    const client = clientOf(gateway);
    const held = client.streamHellos('held', credentials());
    await expect.poll(() => held.replies.length).toBe(3);
    const refused = await client.sayHello('ann', credentials());
    expect(refused.status.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(refused.status.metadata.get('retry-after')).toEqual(['1']);
    expect(String(refused.status.metadata.get('ratelimit')[0])).toMatch(/;r=0;/);
    held.cancel();
    expect((await held.outcome).status.code).toBe(status.CANCELLED);
    await expect.poll(async () => (await client.sayHello('ann', credentials())).status.code).toBe(status.OK);
  });

  it('holds an HTTP/2 stream its slot while it is open: the next stream is 429 and a gRPC call RESOURCE_EXHAUSTED', async () => {
    const gateway = await gatewayWith(store());
    await setQuota(gateway, { type: 'API', name: 'System', restrictions: [concurrency(1)] }, systemQuotaId);
    const session = await http2Session(gateway.url);
    defer(() => session.close());
    const open = session.request({ ':path': '/pets/stream', ...withKey });
    open.on('error', () => undefined);
    await new Promise((resolve) => open.once('data', resolve));
    const refused = await http2Request(session, { path: '/pets/1', headers: withKey });
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    const call = await clientOf(gateway).sayHello('ann', credentials());
    expect(call.status.code).toBe(status.RESOURCE_EXHAUSTED);
    open.close();
    await expect
      .poll(async () => (await http2Request(session, { path: '/pets/1', headers: withKey })).status)
      .toBe(200);
  });
});

describe('a gRPC API asked for over HTTP/1.1, and application/grpc to a plain API', () => {
  const overHttp2Only =
    'HTTP Version Not Supported: a gRPC API is called over HTTP/2 (h2c or TLS with ALPN h2)';

  it('refuses a WebSocket upgrade to a gRPC API with 505 before any 101, and the upstream never sees it', async () => {
    const gateway = await gatewayWith();
    const calls = greeter().calls.length;
    const refused = await mustRefuse(wsUrl(gateway.url, '/helloworld.Greeter/SayHello'), withKey);
    expect(refused.status).toBe(505);
    expect(JSON.parse(refused.body)).toMatchObject({ message: overHttp2Only });
    expect(greeter().calls.length).toBe(calls);
  });

  it('refuses a gRPC call over HTTP/1.1 with 505 in plain HTTP, since no gRPC client reads it', async () => {
    const gateway = await gatewayWith();
    const answer = await request(gateway.url, {
      method: 'POST',
      path: '/helloworld.Greeter/SayHello',
      headers: { ...withKey, 'content-type': 'application/grpc', te: 'trailers', 'content-length': '0' },
    });
    expect(answer.status).toBe(505);
    expect(answer.headers['grpc-status']).toBeUndefined();
    expect(JSON.parse(answer.body)).toMatchObject({
      id: 'com.vendor.api.http_version_not_supported',
      message: overHttp2Only,
    });
  });

  it('answers an HTTP/1.1 request to a plain API in HTTP whatever its content type, and forwards it', async () => {
    const gateway = await gatewayWith();
    const headers = { 'content-type': 'application/grpc', 'content-length': '0' };
    const refused = await request(gateway.url, { method: 'POST', path: '/pets', headers });
    expect(refused.status).toBe(401);
    expect(refused.headers['grpc-status']).toBeUndefined();
    const seen = upstream().requests.length;
    const forwarded = await request(gateway.url, {
      method: 'POST',
      path: '/pets',
      headers: { ...headers, ...withKey },
    });
    expect(forwarded.status).toBe(200);
    expect(upstream().requests.at(seen)?.headers['content-type']).toBe('application/grpc');
  });
});
