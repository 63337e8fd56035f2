import { afterEach, describe, expect, it } from 'vitest';
import { startCliGateway } from '../helpers/cli-gateway.js';
import { moduleLog, type ModuleLog } from '../helpers/module-log.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { spanKind } from '../helpers/trace-trees.js';
import { request } from '../helpers/raw-http.js';
import { basicAuth, devKey, petsConfig } from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

const cleanups: Array<() => Promise<void> | void> = [];
const defer = (cleanup: () => Promise<void> | void) => cleanups.push(cleanup);

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `gateway start` with `workers` and `tracing`, its modules recorded; the upstream it sends to. */
async function cliGateway(tracing: Record<string, unknown>, env: NodeJS.ProcessEnv = {}, workers = 2) {
  const modules: ModuleLog = moduleLog('/@opentelemetry/');
  defer(() => modules.remove());
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const gateway = await startCliGateway(
    petsConfig(`${upstream.url}/pets`, { workers, accessLog: { flushMs: 0 }, tracing }),
    defer,
    { ...modules.env, ...env },
  );
  const answers: number[] = [];
  for (let i = 0; i < 4; i += 1)
    answers.push(
      (await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(devKey) } })).status,
    );
  expect(answers).toEqual([200, 200, 200, 200]);
  return { gateway, upstream, modules };
}

describe('tracing off, as by default', () => {
  it('loads nothing of OpenTelemetry in any process, adds no traceparent and logs no traceId', async () => {
    const { gateway, upstream, modules } = await cliGateway({ enabled: false });
    await gateway.until(() => gateway.accessLines().length === 4);
    expect(modules.urls()).toEqual([]);
    expect(upstream.requests.map((seen) => seen.headers.traceparent)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(gateway.accessLines().map((line) => line.traceId)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('is off when OTEL_SDK_DISABLED=true, whatever the config says', async () => {
    const { modules, upstream } = await cliGateway({ enabled: true }, { OTEL_SDK_DISABLED: 'true' });
    expect(modules.urls()).toEqual([]);
    expect(upstream.requests.at(-1)!.headers.traceparent).toBeUndefined();
  });
});

describe('tracing on', () => {
  it('loads the SDK in each worker, and each exports its own spans to the endpoint OTEL_* names', async () => {
    const receiver = await startOtlpReceiver();
    defer(() => receiver.close());
    const { gateway, modules } = await cliGateway(
      { enabled: true, scheduledDelay: 10 },
      {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: 'from-env',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test,team=edge%20ops',
      },
    );
    expect(modules.urls().some((url) => url.includes('/@opentelemetry/sdk-trace-base/'))).toBe(true);
    // One server span per exchange (its child spans, authentication, may come before it).
    const spans = await receiver.waitForServerSpans(4);
    expect(receiver.spans.map((span) => span.resource)).toEqual(
      Array(receiver.spans.length).fill(
        expect.objectContaining({
          'service.name': 'from-env',
          'deployment.environment': 'test',
          team: 'edge ops',
        }),
      ),
    );
    await gateway.until(() => gateway.accessLines().length === 4);
    expect(new Set(gateway.accessLines().map((line) => line.pid)).size).toBe(2);
    expect(
      gateway
        .accessLines()
        .map((line) => line.traceId)
        .sort(),
    ).toEqual(spans.map((span) => span.traceId).sort());
  });

  it('exports the spans still waiting on SIGTERM, from the data-plane thread of workers: 1', async () => {
    const receiver = await startOtlpReceiver();
    defer(() => receiver.close());
    const { gateway } = await cliGateway(
      { enabled: true, endpoint: receiver.url, scheduledDelay: 600_000 },
      {},
      1,
    );
    expect(receiver.spans).toEqual([]);
    gateway.cli.child.kill('SIGTERM');
    expect((await gateway.cli.exited).code).toBe(0);
    expect(receiver.spans.filter((span) => span.kind === 2)).toHaveLength(4);
    expect(new Set(receiver.spans.map((span) => span.traceId)).size).toBe(4);
    // And each its upstream client span.
    expect(receiver.spans.filter((span) => span.kind === spanKind.client)).toHaveLength(4);
  });
});
