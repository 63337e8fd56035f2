import { AggregatorRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/observe/metrics.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startMetricsGateway } from '../helpers/gateway-metrics.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const line = (text: string, pattern: RegExp) => text.split('\n').find((entry) => pattern.test(entry));
const metricsText = async (gateway: TestGateway) => (await fetch(`${gateway.adminUrl}/metrics`)).text();
const defer = cleanupAfterEach();

describe('metrics', () => {
  it('reports request durations as a Prometheus histogram per API: cumulative buckets, +Inf, sum and count', async () => {
    const metrics = createMetrics();
    for (const seconds of [0.0004, 0.002, 0.002, 0.3, 45]) metrics.request('api-a', 'method-a', 200, seconds);
    metrics.request('api-b', 'method-b', 404, 0.01);
    const text = await metrics.registry.metrics();
    expect(text).toContain('# TYPE quotagate_request_duration_seconds histogram');
    expect(line(text, /^quotagate_request_duration_seconds_bucket\{le="0.001",api="api-a"\}/)).toMatch(/ 1$/);
    expect(line(text, /^quotagate_request_duration_seconds_bucket\{le="0.0025",api="api-a"\}/)).toMatch(
      / 3$/,
    );
    expect(line(text, /^quotagate_request_duration_seconds_bucket\{le="0.25",api="api-a"\}/)).toMatch(/ 3$/);
    expect(line(text, /^quotagate_request_duration_seconds_bucket\{le="0.5",api="api-a"\}/)).toMatch(/ 4$/);
    expect(line(text, /^quotagate_request_duration_seconds_bucket\{le="30",api="api-a"\}/)).toMatch(/ 4$/);
    expect(line(text, /^quotagate_request_duration_seconds_bucket\{le="\+Inf",api="api-a"\}/)).toMatch(/ 5$/);
    expect(line(text, /^quotagate_request_duration_seconds_count\{api="api-a"\}/)).toMatch(/ 5$/);
    expect(
      Number(line(text, /^quotagate_request_duration_seconds_sum\{api="api-a"\}/)!.split(' ')[1]),
    ).toBeCloseTo(45.3044, 6);
    expect(line(text, /^quotagate_request_duration_seconds_count\{api="api-b"\}/)).toMatch(/ 1$/);
    expect(line(text, /^quotagate_requests_total\{api="api-a",method="method-a",status="200"\}/)).toMatch(
      / 5$/,
    );
  });

  it("leaves out the event loop's delay where the loop does no data-plane work, and keeps the process families", async () => {
    const eventLoop = /^quotagate_nodejs_eventloop_lag_p99_seconds /m;
    const beside = await createMetrics({ withoutEventLoopDelay: true }).registry.metrics();
    expect(beside).not.toMatch(/^quotagate_nodejs_eventloop_lag/m);
    expect(beside).toMatch(/^quotagate_process_cpu_seconds_total /m);
    expect(beside).toMatch(/^quotagate_nodejs_heap_size_used_bytes /m);
    expect(await createMetrics().registry.metrics()).toMatch(eventLoop);
  });

  it("adds up the histograms of several workers, as prom-client's cluster registry does its own", async () => {
    const workers = [createMetrics(), createMetrics()];
    workers[0]!.request('api-a', 'method-a', 200, 0.002);
    workers[1]!.request('api-a', 'method-a', 200, 0.002);
    workers[1]!.request('api-a', 'method-a', 200, 2);
    const aggregated = AggregatorRegistry.aggregate(
      await Promise.all(workers.map((worker) => worker.registry.getMetricsAsJSON())),
    );
    const text = await aggregated.metrics();
    expect(line(text, /^quotagate_request_duration_seconds_bucket\{le="0.0025",api="api-a"\}/)).toMatch(
      / 2$/,
    );
    expect(line(text, /^quotagate_request_duration_seconds_count\{api="api-a"\}/)).toMatch(/ 3$/);
  });

  it('says whether the shared counters decide only on a gateway that has them, where 0 means store.onError decides', async () => {
    const alone = await startTestGateway(petsConfig('http://127.0.0.1:9/pets'));
    defer(() => alone.close());
    const shared = await startMetricsGateway();
    defer(() => shared.close());
    expect(await metricsText(alone)).not.toMatch(/^# TYPE quotagate_store_shared /m);
    expect(await metricsText(shared)).toMatch(/^quotagate_store_shared 1$/m);
  });
});
