import { afterEach, describe, expect, it } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { childrenOf, onlyOf, spanKind } from '../helpers/trace-trees.js';
import { request } from '../helpers/raw-http.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const clientTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
const clientSpan = '00f067aa0ba902b7';
const traceparentOf = (flags: '00' | '01', trace = clientTrace) => `00-${trace}-${clientSpan}-${flags}`;

interface Traced {
  receiver: OtlpReceiver;
  upstream: TestUpstream;
  gateway: TestGateway;
  /** Closes the gateway (its spans are exported as it closes), once. */
  closeGateway(): Promise<void>;
}

let parts: Traced | null = null;

afterEach(async () => {
  if (!parts) return;
  await parts.closeGateway();
  await parts.upstream.close();
  await parts.receiver.close();
  parts = null;
});

/** A receiver, an echoing upstream and a gateway tracing to the one with `tracing` settings. */
async function traced(tracing: Record<string, unknown>) {
  const receiver = await startOtlpReceiver();
  const upstream = await startUpstream();
  const gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, {
      tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10, ...tracing },
    }),
  );
  let closing: Promise<void> | null = null;
  parts = { receiver, upstream, gateway, closeGateway: () => (closing ??= gateway.close()) };
  return parts;
}

const get = (gateway: TestGateway, headers: Record<string, string | string[]> = {}) =>
  request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(devKey), ...headers } });

/** The `traceparent` lines the upstream's last request came with, as sent on the wire. */
function traceparentsSeen(upstream: TestUpstream): string[] {
  const raw = upstream.requests.at(-1)!.rawHeaders;
  return raw.flatMap((value, i) =>
    i % 2 === 1 && raw[i - 1]!.toLowerCase() === 'traceparent' ? [value] : [],
  );
}

describe('propagation when the exchange is sampled out', () => {
  it("passes the client's traceparent, tracestate and baggage on unchanged, and logs its trace id", async () => {
    const { gateway, upstream, receiver } = await traced({ sampler: 'parentbased_always_on' });
    const sent = { traceparent: traceparentOf('00'), tracestate: 'vendor=opaque,other=1', baggage: 'k=v' };
    expect((await get(gateway, sent)).status).toBe(200);
    expect(upstream.requests.at(-1)!.headers).toMatchObject(sent);
    expect(traceparentsSeen(upstream)).toEqual([sent.traceparent]);
    expect(accessLines(gateway).at(-1)!.traceId).toBe(clientTrace);
    await parts!.closeGateway();
    expect(receiver.requests).toEqual([]);
  });

  it('sends a trace of its own, not sampled, when the client sent none (the access line has its id)', async () => {
    const { gateway, upstream } = await traced({ sampler: 'always_off' });
    expect((await get(gateway)).status).toBe(200);
    const [sent] = traceparentsSeen(upstream);
    const traceId = accessLines(gateway).at(-1)!.traceId as string;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(sent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
  });

  it.each([
    [
      'two traceparent fields',
      ['00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01', traceparentOf('01')],
    ],
    ['an all-zero trace id', [`00-${'0'.repeat(32)}-${clientSpan}-01`]],
  ])(
    'replaces %s with the one of its own trace, not sampled, and drops the tracestate',
    async (_name, forged) => {
      const { gateway, upstream } = await traced({ sampler: 'always_off' });
      expect((await get(gateway, { traceparent: forged, tracestate: 'evil=1' })).status).toBe(200);
      const traceId = accessLines(gateway).at(-1)!.traceId as string;
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(traceId).not.toBe('a'.repeat(32));
      expect(traceId).not.toBe(clientTrace);
      expect(traceparentsSeen(upstream)).toEqual([
        expect.stringMatching(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`)),
      ]);
      expect(upstream.requests.at(-1)!.headers.tracestate).toBeUndefined();
    },
  );
});

describe('what a client sends that is not one valid traceparent', () => {
  it('replaces two traceparent fields with the one of a trace of its own', async () => {
    const { gateway, upstream, receiver } = await traced({ sampler: 'always_on' });
    const forged = ['00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01', traceparentOf('01')];
    expect((await get(gateway, { traceparent: forged, tracestate: 'evil=1' })).status).toBe(200);
    const seen = traceparentsSeen(upstream);
    expect(seen).toHaveLength(1);
    const [span] = await receiver.waitForServerSpans(1);
    expect(span!.traceId).not.toBe(clientTrace);
    expect(span!.traceId).not.toBe('a'.repeat(32));
    expect(span!.parentSpanId).toBe('');
    // The upstream's parent is the gateway's client span of the exchange, a child of its server span.
    const client = onlyOf(childrenOf(receiver.spans, span!), spanKind.client);
    expect(seen[0]).toBe(`00-${span!.traceId}-${client.spanId}-01`);
    expect(upstream.requests.at(-1)!.headers.tracestate).toBeUndefined();
  });

  it("bounds a client's tracestate to what W3C allows (32 members, 512 characters) when it continues it", async () => {
    const { gateway, upstream, receiver } = await traced({ sampler: 'always_on' });
    const members = Array.from({ length: 200 }, (_, i) => `k${i}=${'v'.repeat(40)}`).join(',');
    expect((await get(gateway, { traceparent: traceparentOf('01'), tracestate: members })).status).toBe(200);
    const [span] = await receiver.waitForSpans(1);
    expect(span!.traceId).toBe(clientTrace);
    const sent = String(upstream.requests.at(-1)!.headers.tracestate ?? '');
    expect(sent.length).toBeLessThanOrEqual(512);
    expect(sent.split(',').length).toBeLessThanOrEqual(32);
  });

  it.each([
    ['a malformed one', 'garbage'],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-${clientSpan}-01`],
    ['version 00 with more parts', `${traceparentOf('01')}-extra`],
    ['one far too long', `00-${clientTrace}-${clientSpan}-01${'x'.repeat(8_000)}`],
  ])('starts a trace of its own for %s, and answers as ever', async (_name, traceparent) => {
    const { gateway, upstream, receiver } = await traced({ sampler: 'always_on' });
    expect((await get(gateway, { traceparent })).status).toBe(200);
    const [span] = await receiver.waitForServerSpans(1);
    expect(span!.parentSpanId).toBe('');
    const client = onlyOf(childrenOf(receiver.spans, span!), spanKind.client);
    expect(traceparentsSeen(upstream)).toEqual([`00-${span!.traceId}-${client.spanId}-01`]);
  });
});

/** What TraceIdRatioBased samplers compute (the SDK's, and the spec's): the four 32-bit words XORed. */
function ratioValue(traceId: string): number {
  let value = 0;
  for (let i = 0; i < 32; i += 8) value = (value ^ Number.parseInt(traceId.slice(i, i + 8), 16)) >>> 0;
  return value;
}

describe('sampling', () => {
  // 40 fixed trace ids, spread over the 32-bit space the ratio is read from.
  const word = (n: number) => (Math.imul(n, 0x9e3779b1) >>> 0).toString(16).padStart(8, '0');
  const traceIds = Array.from(
    { length: 40 },
    (_, i) => `${word(i + 1)}${word(i + 101)}${word(i + 201)}${word(i + 301)}`,
  );

  it.each([
    [0, 0],
    [1, traceIds.length],
  ])('at ratio %s exports %s of the traces', async (ratio, exported) => {
    const { gateway, receiver } = await traced({ sampleRatio: ratio });
    for (let i = 0; i < traceIds.length; i += 1) expect((await get(gateway)).status).toBe(200);
    await parts!.closeGateway();
    expect(await receiver.waitForServerSpans(exported)).toHaveLength(exported);
    // Their child spans, and no other span, of the traces of those exchanges.
    const traces = new Set(receiver.spans.filter((span) => span.kind === 2).map((span) => span.traceId));
    expect(receiver.spans.filter((span) => !traces.has(span.traceId))).toEqual([]);
  });

  it('at 0.5, a new trace is sampled on the id it is logged and exported with: about half of them', async () => {
    const { gateway, upstream, receiver } = await traced({ sampleRatio: 0.5 });
    const bound = Math.floor(0.5 * 0xffffffff);
    const requests = 300;
    const sent: string[] = [];
    for (let i = 0; i < requests; i += 1) {
      expect((await get(gateway)).status).toBe(200);
      sent.push(...traceparentsSeen(upstream));
    }
    await parts!.closeGateway();
    const logged = accessLines(gateway).map((line) => line.traceId as string);
    const kept = logged.filter((id) => ratioValue(id) < bound);
    const servers = receiver.spans.filter((span) => span.kind === 2);
    expect(servers.map((span) => span.traceId).sort()).toEqual([...kept].sort());
    // Decided once, on the id the span takes: deciding again on another id would keep a quarter of them
    // (mean 75, sd 7.5), one decision half (mean 150, sd 8.7).
    expect(kept.length).toBeGreaterThan(112);
    // Each upstream request had one traceparent: the client span's (flag 01) or the trace's own (00).
    expect(sent).toHaveLength(requests);
    sent.forEach((field, i) => {
      const sampled = ratioValue(logged[i]!) < bound;
      expect(field).toMatch(new RegExp(`^00-${logged[i]}-[0-9a-f]{16}-${sampled ? '01' : '00'}$`));
    });
  });

  it('at 0.1 by trace id exports exactly the traces whose id falls under the ratio', async () => {
    const { gateway, receiver } = await traced({ sampler: 'traceidratio', sampleRatio: 0.1 });
    const bound = Math.floor(0.1 * 0xffffffff);
    const expected = traceIds.filter((id) => ratioValue(id) < bound);
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.length).toBeLessThan(traceIds.length);
    for (const id of traceIds)
      expect((await get(gateway, { traceparent: traceparentOf('01', id) })).status).toBe(200);
    await parts!.closeGateway();
    const servers = receiver.spans.filter((span) => span.kind === 2);
    expect(servers.map((span) => span.traceId).sort()).toEqual([...expected].sort());
    expect([...new Set(receiver.spans.map((span) => span.traceId))].sort()).toEqual([...expected].sort());
  });
});
