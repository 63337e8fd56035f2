import { AggregatorRegistry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AddedLatency, latencyBetween, latencyReport } from '../../src/observe/added-latency.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const line = (text: string, pattern: RegExp) => text.split('\n').find((entry) => pattern.test(entry));

describe('added latency', () => {
  it('reports each part at HdrHistogram precision: count, p50, p99, p99.9 and max in milliseconds', () => {
    const latency = new AddedLatency();
    for (let i = 1; i <= 1000; i += 1) latency.request(i / 100);
    latency.response(0.05);
    const report = latencyReport([latency.encoded()]);
    expect(report.request.count).toBe(1000);
    expect(report.request.p50Ms).toBeCloseTo(5, 2);
    expect(report.request.p99Ms).toBeCloseTo(9.9, 1);
    expect(report.request.p999Ms).toBeCloseTo(9.99, 1);
    expect(report.request.maxMs).toBeCloseTo(10, 1);
    expect(report.response).toMatchObject({ count: 1, p50Ms: 0.05, maxMs: 0.05 });
  });

  it('keeps what it cannot tell apart inside its range: nothing negative, nothing beyond a minute', () => {
    const latency = new AddedLatency();
    latency.request(-1);
    latency.request(120_000);
    const report = latencyReport([latency.encoded()]);
    expect(report.request.count).toBe(2);
    expect(report.request.p50Ms).toBe(0);
    expect(report.request.maxMs).toBeCloseTo(60_000, -2);
  });

  it("merges several processes' histograms, and tells what was added between two reports", () => {
    const [one, two] = [new AddedLatency(), new AddedLatency()];
    one.request(1);
    two.request(3);
    const before = latencyReport([one.encoded(), two.encoded()]);
    expect(before.request.count).toBe(2);
    for (let i = 0; i < 10; i += 1) one.request(0.2);
    const after = latencyReport([one.encoded(), two.encoded()]);
    const between = latencyBetween(before, after);
    expect(between.request.count).toBe(10);
    expect(between.request.p99Ms).toBeCloseTo(0.2, 3);
    expect(between.response.count).toBe(0);
  });

  it('is a Prometheus histogram by part, summed across workers', async () => {
    const workers = [new AddedLatency(), new AddedLatency()];
    workers[0]!.request(0.02);
    workers[1]!.request(0.3);
    workers[1]!.response(4);
    const aggregated = AggregatorRegistry.aggregate(
      await Promise.all(
        workers.map((addedLatency) => createMetrics({ addedLatency }).registry.getMetricsAsJSON()),
      ),
    );
    const text = await aggregated.metrics();
    expect(text).toContain('# TYPE quotagate_added_latency_seconds histogram');
    const bucket = (le: string, part: string) =>
      line(text, new RegExp(`^quotagate_added_latency_seconds_bucket\\{le="${le}",part="${part}"\\}`));
    expect(bucket('0.000025', 'request')).toMatch(/ 1$/);
    expect(bucket('0.00025', 'request')).toMatch(/ 1$/);
    expect(bucket('0.0005', 'request')).toMatch(/ 2$/);
    expect(bucket('\\+Inf', 'request')).toMatch(/ 2$/);
    expect(bucket('0.0025', 'response')).toMatch(/ 0$/);
    expect(bucket('0.005', 'response')).toMatch(/ 1$/);
    expect(line(text, /^quotagate_added_latency_seconds_count\{part="response"\}/)).toMatch(/ 1$/);
  });
});

describe('added latency of a running gateway', () => {
  let upstream: TestUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    upstream = await startUpstream((_req, res) => res.end('ok'));
    gateway = await startTestGateway(petsConfig(upstream.url));
  });

  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it('counts every proxied exchange in /latency and /metrics, and no request it answered itself', async () => {
    const headers = { authorization: basicAuth(devKey) };
    for (let i = 0; i < 5; i += 1) {
      expect((await request(gateway.url, { path: `/pets/${i}`, headers })).status).toBe(200);
    }
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(401);
    const report = (await (await fetch(`${gateway.adminUrl}/latency`)).json()) as ReturnType<
      typeof latencyReport
    >;
    expect(report.request.count).toBe(5);
    expect(report.response.count).toBe(5);
    for (const part of [report.request, report.response]) {
      expect(part.p50Ms).toBeGreaterThanOrEqual(0);
      expect(part.p50Ms).toBeLessThanOrEqual(part.p99Ms);
      expect(part.p99Ms).toBeLessThanOrEqual(part.maxMs);
    }
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(line(metrics, /^quotagate_added_latency_seconds_count\{part="request"\}/)).toMatch(/ 5$/);
  });
});
