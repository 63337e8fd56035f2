import type { FlattenedJWSInput } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthTracing } from '../../src/auth/auth-tracing.js';
import { JwksKeys, JwksUnavailable } from '../../src/auth/jwks-keys.js';
import { systemClock } from '../../src/kit/clock.js';
import { startOtelTracing } from '../../src/observe/otel-tracing.js';
import type { Tracing } from '../../src/observe/tracing.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { rsaKey, startJwksServer, type JwksServer } from '../helpers/jwks-server.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';

let receiver: OtlpReceiver;
let jwks: JwksServer;
let tracing: Tracing;
const header = { alg: 'RS256', kid: 'key-1' };
// The token matters only to a kid vouched for within the cooldown, which these fetches never are.
const token: FlattenedJWSInput = { protected: '', payload: '', signature: '' };

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  jwks = await startJwksServer([(await rsaKey('key-1')).publicJwk]);
  tracing = startOtelTracing({
    settings: {
      endpoint: receiver.url,
      headers: {},
      resource: { 'service.name': 'jwks-test' },
      sampler: 'always_on',
      ratio: 1,
      maxQueueSize: 100,
      maxExportBatchSize: 100,
      scheduledDelayMs: 10,
      exportTimeoutMs: 5_000,
    },
    onDropped: () => undefined,
    onExportState: () => undefined,
    timers: systemClock,
  });
});

afterAll(async () => {
  await tracing?.close(1_000);
  await jwks?.close();
  await receiver?.close();
});

/** A fresh set of no keys known yet, on a clock the test moves. */
function freshKeys() {
  const clock = new FakeClock();
  const keys = new JwksKeys(jwks.url, {
    cooldownMs: 60_000,
    maxAgeMs: 600_000,
    timeoutMs: 2_000,
    clock,
    onFetch: () => undefined,
    onFailure: () => undefined,
  });
  return { keys, clock };
}

/** An exchange's trace with its authentication span, as the authenticate step hands it to a scheme. */
function authentication(): AuthTracing & { end(): void } {
  const trace = tracing.start({}, 'GET');
  const span = trace.child('quotagate.authenticate');
  return {
    trace,
    span,
    end() {
      span.end();
      trace.span.end();
    },
  };
}

/** The spans the receiver got of `traced`'s trace, once its server span came. */
async function spansOf(traced: AuthTracing): Promise<ReceivedSpan[]> {
  const { traceId } = traced.trace;
  while (!receiver.spans.some((span) => span.traceId === traceId && span.kind === 2))
    await receiver.waitForSpans(receiver.spans.length + 1);
  return receiver.spans.filter((span) => span.traceId === traceId);
}

describe('the JWKS fetch as a client span', () => {
  it('is a child of the request that started it; a request that waits on it links to it', async () => {
    const { keys } = freshKeys();
    const first = authentication();
    const second = authentication();
    const before = jwks.fetches;
    await Promise.all([keys.resolve(header, token, first), keys.resolve(header, token, second)]);
    expect(jwks.fetches).toBe(before + 1);
    first.end();
    second.end();
    const [firstSpans, secondSpans] = await Promise.all([spansOf(first), spansOf(second)]);
    const started = firstSpans.find((span) => span.name === 'quotagate.authenticate')!;
    const fetch = firstSpans.find((span) => span.name === 'GET')!;
    expect(fetch).toMatchObject({
      kind: 3,
      parentSpanId: started.spanId,
      status: { code: 0 },
      attributes: { 'http.request.method': 'GET', 'url.full': jwks.url, 'http.response.status_code': 200 },
    });
    expect(started.attributes['quotagate.auth.jwks_wait']).toBeUndefined();
    const waited = secondSpans.find((span) => span.name === 'quotagate.authenticate')!;
    expect(secondSpans.map((span) => span.name).sort()).toEqual(['GET', 'quotagate.authenticate']);
    expect(waited.attributes['quotagate.auth.jwks_wait']).toBe(true);
    expect(waited.links).toEqual([{ traceId: first.trace.traceId, spanId: fetch.spanId }]);
  });

  it('fails with the status when the endpoint answers 500, and with JWKSTimeout when it hangs', async () => {
    jwks.down = true;
    const refused = authentication();
    await expect(freshKeys().keys.resolve(header, token, refused)).rejects.toBeInstanceOf(JwksUnavailable);
    refused.end();
    expect((await spansOf(refused)).find((span) => span.name === 'GET')).toMatchObject({
      status: { code: 2 },
      attributes: { 'http.response.status_code': 500, 'error.type': '500' },
    });
    jwks.down = false;
    jwks.hanging = true;
    const { keys, clock } = freshKeys();
    const hung = authentication();
    // Its failure is taken at once: it comes as the clock passes the timeout, before it is awaited.
    const failure = keys.resolve(header, token, hung).then(
      () => null,
      (error: unknown) => error,
    );
    const fetches = jwks.fetches;
    while (jwks.fetches === fetches) await new Promise((resolve) => setImmediate(resolve));
    await clock.advance(2_000);
    expect(await failure).toBeInstanceOf(JwksUnavailable);
    hung.end();
    jwks.hanging = false;
    const fetch = (await spansOf(hung)).find((span) => span.name === 'GET')!;
    expect(fetch).toMatchObject({ status: { code: 2 }, attributes: { 'error.type': 'JWKSTimeout' } });
    expect(fetch.attributes['http.response.status_code']).toBeUndefined();
  });
});
