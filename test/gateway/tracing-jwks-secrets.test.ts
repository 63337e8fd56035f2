import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  rsaKey,
  signToken,
  startJwksServer,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwks-server.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { request } from '../helpers/raw-http.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { spanKind, spanTexts, traceOf } from '../helpers/trace-trees.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

// A JWKS URL may carry a credential in its query (`?token=…`, a signed URL's `sig=`): the identity
// provider takes it as one. It is the config's, never the client's, and no span or log line may show it.

const issuer = 'https://idp.example/realms/test';
const audience = 'pets-api';
// The query's values: one whose name sounds secret, one whose name does not (a signed URL's).
const token = 's3cret-jwks-token-4f9a1c';
const signature = 'q7Zr2kXw9pLm';

let receiver: OtlpReceiver;
let upstream: TestUpstream;
let jwks: JwksServer;
let firstKey: SigningKey;
let gateway: TestGateway;

const get = async (key: SigningKey, sub: string) =>
  request(gateway.url, {
    path: '/pets/1',
    headers: {
      authorization: `Bearer ${await signToken(key, { iss: issuer, aud: audience, sub, client_id: 'app-a' })}`,
    },
  });

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream();
  firstKey = await rsaKey('key-1');
  jwks = await startJwksServer([firstKey.publicJwk]);
  gateway = await startTestGateway(
    petsConfig(upstream.url, {
      APIKeyAuthType: 'jwt',
      jwt: { jwksUri: `${jwks.url}?token=${token}&sig=${signature}`, issuer, audience },
      tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 },
    }),
  );
  // Whether the fetch at start is over or not, the keys of key-1 are known after this one.
  expect((await get(firstKey, 'warm-up')).status).toBe(200);
});

afterAll(async () => {
  await gateway?.close();
  await jwks?.close();
  await upstream?.close();
  await receiver?.close();
});

describe('a JWKS URL with a credential in its query', () => {
  it('is fetched with its query, and its fetch span has the URL without it', async () => {
    const rotated = await rsaKey('key-2');
    jwks.keys = [firstKey.publicJwk, rotated.publicJwk];
    const fetches = jwks.fetches;
    expect((await get(rotated, 'user-1')).status).toBe(200);
    expect(jwks.fetches).toBe(fetches + 1);
    // The provider was sent its credential.
    expect(new URL(jwks.lastPath!, 'http://idp').searchParams.get('token')).toBe(token);
    const trace = await traceOf(gateway, receiver, 200);
    const fetch = trace.childrenOf(trace.one('quotagate.authenticate'));
    expect(fetch).toEqual([
      expect.objectContaining({
        name: 'GET',
        kind: spanKind.client,
        attributes: expect.objectContaining({ 'url.full': jwks.url }) as unknown,
      }),
    ]);
  });

  it('leaves the query out of a failed fetch span and out of the log line of the failure', async () => {
    // A token of a key not known yet fetches the set again; the provider answers 500, and the token is
    // refused (the keys known keep verifying, but none is its).
    jwks.down = true;
    const unknown = await rsaKey('key-3');
    expect((await get(unknown, 'user-2')).status).toBe(401);
    jwks.down = false;
    const trace = await traceOf(gateway, receiver, 401);
    const fetch = trace.childrenOf(trace.one('quotagate.authenticate'));
    expect(fetch).toEqual([
      expect.objectContaining({
        name: 'GET',
        status: { code: 2, message: '500' },
        attributes: expect.objectContaining({ 'url.full': jwks.url }) as unknown,
      }),
    ]);
    const failure = gateway.logs.find((line) => line.msg === 'jwks fetch failed');
    expect(failure).toMatchObject({ jwksUri: jwks.url });
  });

  it('shows neither value of the query in any span or log line', async () => {
    await receiver.waitForServerSpans(3);
    const texts = [...spanTexts(receiver.spans), gateway.rawLogs()];
    expect(texts.join('\n')).toContain(new URL(jwks.url).pathname);
    for (const text of texts) {
      expect(text).not.toContain(token);
      expect(text).not.toContain(signature);
    }
  });
});
