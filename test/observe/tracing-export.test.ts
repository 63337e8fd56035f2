import { afterEach, describe, expect, it } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

let cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

async function started<T extends { close(): Promise<void> }>(part: Promise<T>): Promise<T> {
  const value = await part;
  let closing: Promise<void> | null = null;
  const close = value.close.bind(value);
  value.close = () => (closing ??= close());
  cleanups.push(() => value.close());
  return value;
}

async function gatewayTracingTo(
  endpoint: string,
  tracing: Record<string, unknown> = {},
  overrides: Record<string, unknown> = {},
) {
  const upstream: TestUpstream = await started(startUpstream());
  const gateway: TestGateway = await started(
    startTestGateway(
      petsConfig(`${upstream.url}/pets`, {
        tracing: { enabled: true, endpoint, scheduledDelay: 10, exportTimeout: 500, ...tracing },
        ...overrides,
      }),
    ),
  );
  return gateway;
}

/** Statuses of `count` GETs, one after the other. */
async function statuses(gateway: TestGateway, count: number): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < count; i += 1)
    seen.push(
      (await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(devKey) } })).status,
    );
  return seen;
}

/** `quotagate_tracing_spans_dropped_total{reason}` on the gateway's /metrics. */
async function dropped(gateway: TestGateway, reason: string): Promise<number> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  const line = text
    .split('\n')
    .find((row) => row.startsWith(`quotagate_tracing_spans_dropped_total{reason="${reason}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

const allOk = (count: number) => Array<number>(count).fill(200);

describe('a collector that does not take the spans', () => {
  it('is down: every request answered, the spans of each failed export dropped and counted', async () => {
    const gone = await startOtlpReceiver();
    await gone.close();
    const gateway = await gatewayTracingTo(gone.url);
    expect(await statuses(gateway, 5)).toEqual(allOk(5));
    await expect.poll(() => dropped(gateway, 'export_failed')).toBeGreaterThanOrEqual(5);
    expect(await dropped(gateway, 'queue_full')).toBe(0);
  });

  it('answers 500: every request answered, its spans dropped and counted, the log says so once', async () => {
    const receiver: OtlpReceiver = await started(startOtlpReceiver());
    receiver.answer = 500;
    const gateway = await gatewayTracingTo(receiver.url);
    expect(await statuses(gateway, 5)).toEqual(allOk(5));
    await expect.poll(() => dropped(gateway, 'export_failed')).toBeGreaterThanOrEqual(5);
    expect(receiver.requests.length).toBeGreaterThan(0);
    expect(receiver.spans).toEqual([]);
    const warnings = gateway.logs.filter((line) => String(line.msg).startsWith('exporting spans failed'));
    expect(warnings).toHaveLength(1);
    // It answers again: the spans go through, and the log says exports work again.
    receiver.answer = 200;
    expect(await statuses(gateway, 1)).toEqual(allOk(1));
    await receiver.waitForSpans(1);
    await expect
      .poll(() => gateway.logs.some((line) => line.msg === 'exporting spans works again'))
      .toBe(true);
  });

  it('never answers: requests go on, what waits past maxQueueSize is dropped as queue_full', async () => {
    const receiver: OtlpReceiver = await started(startOtlpReceiver());
    receiver.answer = 'hang';
    // Its close waits for the export in flight no longer than shutdownTimeout.
    const gateway = await gatewayTracingTo(
      receiver.url,
      { maxQueueSize: 2, maxExportBatchSize: 1, exportTimeout: 60_000 },
      { shutdownTimeout: 200 },
    );
    expect(await statuses(gateway, 12)).toEqual(allOk(12));
    expect(receiver.requests.length).toBeGreaterThan(0);
    await expect.poll(() => dropped(gateway, 'queue_full')).toBeGreaterThan(0);
  });

  it('answers late: the export is given up after exportTimeout and its spans counted', async () => {
    const receiver: OtlpReceiver = await started(startOtlpReceiver());
    receiver.answer = 'hang';
    const gateway = await gatewayTracingTo(receiver.url, { exportTimeout: 100 });
    expect(await statuses(gateway, 3)).toEqual(allOk(3));
    await expect.poll(() => dropped(gateway, 'export_failed')).toBeGreaterThanOrEqual(1);
  });
});

describe('closing', () => {
  it('exports the spans still waiting when the gateway closes', async () => {
    const receiver: OtlpReceiver = await started(startOtlpReceiver());
    const gateway = await gatewayTracingTo(receiver.url, { scheduledDelay: 600_000 });
    expect(await statuses(gateway, 3)).toEqual(allOk(3));
    expect(receiver.spans).toEqual([]);
    await gateway.close();
    expect(receiver.spans.filter((span) => span.kind === 2)).toHaveLength(3);
    // With the child spans of their exchanges (authentication), one trace each.
    expect(new Set(receiver.spans.map((span) => span.traceId)).size).toBe(3);
    expect(receiver.requests.every((sent) => sent.contentType === 'application/x-protobuf')).toBe(true);
  });
});
