import { rmSync } from 'node:fs';
import { credentials as channelCredentials, status } from '@grpc/grpc-js';
import { basicChallenge } from '../../src/auth/challenges.js';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { eachStore, startFleetOfTwo } from '../helpers/enforcement-gateways.js';
import {
  greeterApi,
  greeterApiId,
  greeterClient,
  metadataOf,
  sayHelloId,
  startGreeterUpstream,
  statusDetails,
} from '../helpers/grpc-greeter.js';
import {
  accessLines,
  devKey,
  mb,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { createTestCertificate } from '../helpers/tls-cert.js';
import { credentials } from '../helpers/grpc-credentials.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

/**
 * gRPC through the gateway (issue 32, point 4), as a grpc-js client sees it, against a grpc-js server:
 * the four kinds of call with their metadata and trailers, and each answer the gateway makes itself in
 * gRPC's form, on both stores.
 */
const defer = cleanupAfterEach();
const greeter = useSuiteUpstream(() => startGreeterUpstream());

/** A Greeter client of the gateway's plain-HTTP port (h2c), closed after the test. */
const clientOf = (gateway: TestGateway) => {
  const client = greeterClient(new URL(gateway.url).host);
  defer(() => client.close());
  return client;
};

describe.each(eachStore)('gRPC calls through the gateway, on %s', (_store, storeConfig) => {
  async function gatewayWith(overrides: Record<string, unknown> = {}): Promise<TestGateway> {
    const gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9', {
        apis: [greeterApi(`http://${greeter().address}`)],
        ...storeConfig(),
        ...overrides,
      }),
    );
    defer(() => gateway.close());
    return gateway;
  }

  it('passes a unary call with its metadata both ways and its trailers', async () => {
    const gateway = await gatewayWith();
    const client = clientOf(gateway);
    const metadata = credentials();
    metadata.set('x-trace', 'trace-1');
    const outcome = await client.sayHello('ann', metadata);
    expect(outcome.status.code).toBe(status.OK);
    expect(outcome.replies).toEqual([{ message: 'Hello ann' }]);
    expect(outcome.headers?.get('x-trace')).toEqual(['trace-1']);
    expect(outcome.headers?.get('x-request-id')).toHaveLength(1);
    expect(outcome.status.metadata.get('x-served-by')).toEqual(['greeter']);
    // The upstream got the call's own metadata, not the credentials the gateway checked.
    expect(greeter().calls.at(-1)?.get('x-trace')).toEqual(['trace-1']);
    expect(greeter().calls.at(-1)?.get('authorization')).toEqual([]);
  });

  it("relays the upstream's non-OK status with its message, grpc-status-details-bin and trailers", async () => {
    const gateway = await gatewayWith();
    const outcome = await clientOf(gateway).sayHello('missing', credentials());
    expect(outcome.status.code).toBe(status.NOT_FOUND);
    expect(outcome.status.details).toBe('no greeter for missing');
    expect(outcome.status.metadata.get('grpc-status-details-bin')).toEqual([statusDetails]);
    expect(outcome.status.metadata.get('x-served-by')).toEqual(['greeter']);
    await expect
      .poll(() => accessLines(gateway))
      .toMatchObject([
        { status: 200, method: 'SayHello', outcome: 'completed', grpcStatus: status.NOT_FOUND },
      ]);
  });

  it('passes a client-streaming call: every message reaches the upstream', async () => {
    const client = clientOf(await gatewayWith());
    const outcome = await client.gatherHellos(['ann', 'bob', 'cy'], credentials());
    expect(outcome.status.code).toBe(status.OK);
    expect(outcome.replies).toEqual([{ message: 'Hello ann, bob, cy' }]);
    expect(outcome.status.metadata.get('x-served-by')).toEqual(['greeter']);
  });

  it('passes a server-streaming call: every message reaches the client, then the trailers', async () => {
    const client = clientOf(await gatewayWith());
    const outcome = await client.listHellos('ann', credentials());
    expect(outcome.status.code).toBe(status.OK);
    expect(outcome.replies.map((reply) => reply.message)).toEqual([
      'Hello ann #1',
      'Hello ann #2',
      'Hello ann #3',
    ]);
    expect(outcome.status.metadata.get('x-served-by')).toEqual(['greeter']);
  });

  it("passes messages larger than a stream's buffer: every one reaches the client before the status", async () => {
    const client = clientOf(await gatewayWith());
    // Each reply is more than the client's stream takes at once: the upstream is paused while it waits.
    const name = 'n'.repeat(100_000);
    const streamed = await client.listHellos(name, credentials());
    expect(streamed.status.code).toBe(status.OK);
    expect(streamed.replies.map((reply) => reply.message)).toEqual(
      [1, 2, 3].map((i) => `Hello ${name} #${i}`),
    );
    const unary = await client.sayHello(name, credentials());
    expect(unary.status.code).toBe(status.OK);
    expect(unary.replies).toEqual([{ message: `Hello ${name}` }]);
  });

  it('passes a bidirectional call: each message is answered while the call stays open', async () => {
    const client = clientOf(await gatewayWith());
    // Each name is sent only once the answer to the one before it has come back through the gateway.
    const outcome = await client.chat(['ann', 'bob', 'cy'], credentials());
    expect(outcome.status.code).toBe(status.OK);
    expect(outcome.replies.map((reply) => reply.message)).toEqual(['Hello ann', 'Hello bob', 'Hello cy']);
    expect(outcome.status.metadata.get('x-served-by')).toEqual(['greeter']);
  });

  it('answers a call without credentials UNAUTHENTICATED, and the upstream never sees it', async () => {
    const client = clientOf(await gatewayWith());
    const before = greeter().calls.length;
    const outcome = await client.sayHello('ann');
    expect(outcome.status.code).toBe(status.UNAUTHENTICATED);
    expect(outcome.status.details).toBe('Unauthorized');
    expect(outcome.status.metadata.get('www-authenticate')).toEqual([basicChallenge]);
    expect(greeter().calls.length).toBe(before);
  });

  it('answers a method the catalog does not declare UNIMPLEMENTED', async () => {
    const gateway = await gatewayWith({
      apis: [{ ...greeterApi(`http://${greeter().address}`), methods: [greeterApi('').methods[1]] }],
    });
    const outcome = await clientOf(gateway).sayHello('ann', credentials());
    expect(outcome.status.code).toBe(status.UNIMPLEMENTED);
    expect(outcome.status.details).toBe('Not Found');
  });

  it('counts a quota per gRPC method: RESOURCE_EXHAUSTED with RateLimit and Retry-After, other methods go on', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      {
        type: 'API',
        name: 'System',
        restrictions: [throttle(1, 1, 'minute', { api: greeterApiId, method: sayHelloId })],
      },
      systemQuotaId,
    );
    const client = clientOf(gateway);
    expect((await client.sayHello('ann', credentials())).status.code).toBe(status.OK);
    const refused = await client.sayHello('ann', credentials());
    expect(refused.status.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(refused.status.details).toBe('Too Many Requests');
    const trailers = refused.status.metadata;
    expect(Number(trailers.get('retry-after')[0])).toBeGreaterThan(0);
    expect(trailers.get('ratelimit')[0]).toMatch(new RegExp(`^"${systemQuotaId}/0";r=0;t=\\d+$`));
    expect(trailers.get('ratelimit-policy')[0]).toBe(`"${systemQuotaId}/0";q=1;w=60`);
    expect((await client.listHellos('ann', credentials())).status.code).toBe(status.OK);
    await expect
      .poll(() => accessLines(gateway).map((line) => [line.method, line.status, line.grpcStatus]))
      .toEqual([
        ['SayHello', 200, status.OK],
        ['SayHello', 429, status.RESOURCE_EXHAUSTED],
        ['ListHellos', 200, status.OK],
      ]);
  });

  it('counts the bytes of the messages both ways against throttlemb', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [mb(1, 1, 'minute')] },
      systemQuotaId,
    );
    expect((await clientOf(gateway).sayHello('ann', credentials())).status.code).toBe(status.OK);
    // A message is a 5-byte prefix and its protobuf: `ann` is 5 + 5 bytes, `Hello ann` 5 + 11.
    await expect
      .poll(async () => (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]!.used)
      .toBe(26);
    await expect.poll(() => accessLines(gateway)).toMatchObject([{ bytesIn: 10, bytesOut: 16 }]);
  });
});

describe('gRPC over TLS to the gateway', () => {
  it('takes a call by ALPN h2 on the TLS listener, its key as apikey metadata, and refuses the plain port', async () => {
    const certificate = await createTestCertificate();
    defer(() => rmSync(certificate.dir, { recursive: true, force: true }));
    const gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9', {
        APIKeyAuthType: 'apikey',
        tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
        apis: [greeterApi(`http://${greeter().address}`)],
      }),
    );
    defer(() => gateway.close());
    const withKey = () => metadataOf({ apikey: devKey });
    const overTls = greeterClient(
      `localhost:${gateway.running.ports.https}`,
      channelCredentials.createSsl(Buffer.from(certificate.cert)),
    );
    defer(() => overTls.close());
    const outcome = await overTls.chat(['ann'], withKey());
    expect(outcome.status.code).toBe(status.OK);
    expect(outcome.replies).toEqual([{ message: 'Hello ann' }]);
    // Keys travel over HTTPS only: on the plain port the call is refused, and told why.
    const plain = await clientOf(gateway).sayHello('ann', withKey());
    expect(plain.status.code).toBe(status.UNAUTHENTICATED);
    expect(plain.status.details).toBe(
      'Unauthorized: API keys are accepted over HTTPS only (this is the plain-HTTP port)',
    );
  });
});

describe('a gRPC method quota across a fleet on Redis', () => {
  it('counts the calls of both gateways against one limit', async () => {
    const [a, b] = await startFleetOfTwo(defer, { apis: [greeterApi(`http://${greeter().address}`)] });
    const listHellosId = greeterApi('').methods[2]!.id;
    await setQuota(
      a,
      {
        type: 'API',
        name: 'System',
        restrictions: [
          throttle(2, 1, 'minute', { api: greeterApiId, method: sayHelloId }),
          throttle(100, 1, 'minute', { api: greeterApiId, method: listHellosId }),
        ],
      },
      systemQuotaId,
    );
    // b enforces the quota once ListHellos carries its RateLimit fields there.
    await expect
      .poll(async () => (await clientOf(b).listHellos('ann', credentials())).headers?.get('ratelimit-policy'))
      .toHaveLength(1);
    expect((await clientOf(a).sayHello('ann', credentials())).status.code).toBe(status.OK);
    expect((await clientOf(b).sayHello('bob', credentials())).status.code).toBe(status.OK);
    // Counted apart, a would have room for a second call.
    expect((await clientOf(a).sayHello('ann', credentials())).status.code).toBe(status.RESOURCE_EXHAUSTED);
  });
});
