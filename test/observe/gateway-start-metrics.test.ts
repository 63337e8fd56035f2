import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCliGateway, type CliGateway } from '../helpers/cli-gateway.js';
import {
  sendEveryKind,
  setTrafficQuota,
  startTrafficUpstreams,
  trafficConfig,
  type Answered,
} from '../helpers/every-kind-of-traffic.js';
import {
  alertRules,
  dashboardQueries,
  documentedFamilies,
  familiesOf,
  metricsIn,
  ownFamilies,
  promtool,
  runPromtool,
  samplesOf,
  seriesNames,
  sumOf,
  withEverySampled,
} from '../helpers/gateway-metrics.js';

/**
 * The /metrics of `gateway start` as an operator runs it (the data plane in a thread with `workers: 1`,
 * the default; two worker processes and their primary with `workers: 2`), after traffic of every kind:
 * every family docs/logging.md lists is there with its type and nothing else is, the traffic is counted
 * whatever process served it, and what reads the text (promtool, the Grafana dashboard, the alert rules)
 * reads it as it is. The promtool check is skipped where promtool is not installed (.ci/run installs
 * Debian's `prometheus` package, which has it).
 */
describe.each([1, 2])('the /metrics of gateway start with workers: %i', (workers) => {
  const cleanups: Array<() => Promise<void> | void> = [];
  // The one family a gateway without shared counters leaves out (the data-plane thread of workers: 1
  // holds the memory store's counters itself), as the table says: a query of it finds nothing there.
  const leftOut = workers === 1 ? ['quotagate_store_shared'] : [];
  let gateway: CliGateway;
  let answered: Answered[];
  let text: string;

  beforeAll(async () => {
    const upstreams = await startTrafficUpstreams();
    cleanups.push(() => upstreams.close());
    gateway = await startCliGateway(trafficConfig(upstreams, { workers }), (cleanup) =>
      cleanups.push(cleanup),
    );
    await setTrafficQuota(gateway);
    answered = await sendEveryKind(gateway);
    // An exchange is counted once its answer has closed on the gateway's side, just after the client read it.
    await gateway.until(() => gateway.accessLines().length === answered.length);
    text = await gateway.metricsText();
  }, 120_000);

  afterAll(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('has every family docs/logging.md lists, each of the type it says, and none it does not', () => {
    const documented = documentedFamilies();
    const prefixes = documented.filter(({ name }) => name.endsWith('*')).map(({ name }) => name.slice(0, -1));
    const named = documented.filter(({ name }) => !name.endsWith('*'));
    const exported = familiesOf(text);
    const own = ownFamilies(exported);
    expect([...own].sort()).toEqual(
      named
        .map(({ name }) => name)
        .filter((name) => !leftOut.includes(name))
        .sort(),
    );
    for (const { name, type } of exported.filter((family) => own.includes(family.name)))
      expect(type, name).toBe(named.find((family) => family.name === name)?.type);
    // prom-client's families are listed by their prefix: each has some, and every family has its row.
    for (const prefix of prefixes)
      expect(
        exported.some(({ name }) => name.startsWith(prefix)),
        prefix,
      ).toBe(true);
    const undocumented = exported.filter(
      ({ name }) =>
        !named.some((family) => family.name === name) && !prefixes.some((prefix) => name.startsWith(prefix)),
    );
    expect(undocumented).toEqual([]);
  });

  it('counts every request of every kind, whichever process answered it', () => {
    const expected = new Map<string, number>();
    for (const { api, method, status } of answered) {
      const key = `${api} ${method} ${status}`;
      expected.set(key, (expected.get(key) ?? 0) + 1);
    }
    const counted = new Map(
      samplesOf(text)
        .filter((sample) => sample.name === 'quotagate_requests_total')
        .map(({ labels, value }) => [`${labels.api} ${labels.method} ${labels.status}`, value]),
    );
    expect(counted).toEqual(expected);
    expect(sumOf(text, 'quotagate_request_duration_seconds_count')).toBe(answered.length);
    // With workers: 2 the connections went to both workers: the counts above are of both.
    const servedBy = new Set(gateway.accessLines().map((line) => line.worker));
    expect(servedBy.size).toBe(workers);
  });

  it('counts the quota decisions, the refusals, the units and the upstream errors of that traffic', () => {
    const system = (restriction: number, labels: Record<string, string> = {}) => ({
      quota: 'System',
      restriction: String(restriction),
      ...labels,
    });
    expect(sumOf(text, 'quotagate_quota_decisions_total', system(0, { decision: 'allowed' }))).toBe(1);
    expect(sumOf(text, 'quotagate_quota_decisions_total', system(0, { decision: 'rejected' }))).toBe(1);
    expect(sumOf(text, 'quotagate_shadow_refusals_total', system(1))).toBe(1);
    expect(sumOf(text, 'quotagate_units_unreadable_total', system(2))).toBe(1);
    expect(sumOf(text, 'quotagate_upstream_errors_total', { api: 'Dead end', outcome: 'unreachable' })).toBe(
      1,
    );
    expect(sumOf(text, 'quotagate_added_latency_seconds_count', { part: 'request' })).toBeGreaterThan(0);
  });

  it('counts the memory bound of the counters where they are held: the 503, the shadow counts dropped and uncounted', () => {
    expect(sumOf(text, 'quotagate_store_full_total')).toBe(1);
    expect(sumOf(text, 'quotagate_shadow_counts_dropped_total')).toBeGreaterThan(0);
    expect(
      sumOf(text, 'quotagate_shadow_uncounted_total', { quota: 'System', restriction: '4' }),
    ).toBeGreaterThan(0);
    const reserved = sumOf(text, 'quotagate_store_memory_reserved_bytes');
    expect(reserved).toBeGreaterThan(1_048_576 / 2);
    expect(reserved).toBeLessThanOrEqual(1_048_576);
  });

  it("reports the process's families once, and its workers", () => {
    expect(
      samplesOf(text).filter((sample) => sample.name === 'quotagate_process_cpu_seconds_total'),
    ).toHaveLength(1);
    expect(sumOf(text, 'quotagate_workers_listening')).toBe(workers);
    expect(sumOf(text, 'quotagate_worker_restarts_total')).toBe(0);
    if (workers > 1) {
      // The workers decide with the primary's counters, through trips to it.
      expect(sumOf(text, 'quotagate_store_shared')).toBe(1);
      expect(sumOf(text, 'quotagate_store_trips_total')).toBeGreaterThan(0);
    }
  });

  it.skipIf(!promtool)('passes promtool check metrics, every family of it', async () => {
    expect(await runPromtool(['check', 'metrics'], withEverySampled(text))).toEqual({
      exitCode: 0,
      output: '',
    });
  });

  it('has every metric the Grafana dashboard queries, and the dashboard shows every family of its own', () => {
    const names = new Set([...seriesNames(familiesOf(text)), ...leftOut]);
    const queried = new Set(dashboardQueries().flatMap(metricsIn));
    expect([...queried].filter((name) => !names.has(name))).toEqual([]);
    const shown = (family: string) =>
      [...queried].some((name) => name === family || name.startsWith(`${family}_`));
    expect(ownFamilies(familiesOf(text)).filter((family) => !shown(family))).toEqual([]);
  });

  it('has every metric the Prometheus alert rules read', () => {
    const names = new Set([...seriesNames(familiesOf(text)), ...leftOut]);
    const read = alertRules().flatMap((rule) => metricsIn(rule.expr));
    expect(read.length).toBeGreaterThan(0);
    expect(read.filter((name) => !names.has(name))).toEqual([]);
  });
});
