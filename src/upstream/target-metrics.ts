import type { Metric, Registry } from 'prom-client';
import { uniqueLabels } from '../kit/unique-labels.js';
import type { ApiUpstream, TargetState } from '../console/logic/upstreams.js';

/** One family of the target metrics: what it reads of a target's state, and how workers' values add up. */
interface TargetFamily {
  name: string;
  help: string;
  type: 'gauge' | 'counter';
  aggregator: 'sum' | 'min' | 'max';
  read(target: TargetState): number;
}

const families: readonly TargetFamily[] = [
  {
    name: 'quotagate_upstream_target_healthy',
    help: "1 while this gateway's health checks find the target of a pool API healthy (always 1 without healthCheck), 0 while it is out; by API name (id where names repeat) and target origin",
    type: 'gauge',
    // Across the workers of `workers: N`: 0 as soon as one of them finds it out.
    aggregator: 'min',
    read: (target) => (target.healthy ? 1 : 0),
  },
  {
    name: 'quotagate_upstream_target_ejected',
    help: "1 while this gateway's outlier detection has the target of a pool API ejected, 0 otherwise; by API name (id where names repeat) and target origin",
    type: 'gauge',
    // Across the workers of `workers: N`: 1 as soon as one of them has it ejected.
    aggregator: 'max',
    read: (target) => (target.ejected ? 1 : 0),
  },
  {
    name: 'quotagate_upstream_target_ejections_total',
    help: 'Times outlier detection ejected the target of a pool API, by API name (id where names repeat) and target origin',
    type: 'counter',
    aggregator: 'sum',
    read: (target) => target.ejections,
  },
  {
    name: 'quotagate_upstream_target_in_flight',
    help: 'Exchanges sent to the target of a pool API and not yet answered, by API name (id where names repeat) and target origin',
    type: 'gauge',
    aggregator: 'sum',
    read: (target) => target.inFlight,
  },
  {
    name: 'quotagate_upstream_target_requests_total',
    help: 'Exchanges sent to the target of a pool API (retries included), by API name (id where names repeat) and target origin',
    type: 'counter',
    aggregator: 'sum',
    read: (target) => target.requests,
  },
  {
    name: 'quotagate_upstream_target_failures_total',
    help: 'Exchanges to the target of a pool API that failed without an answer (refused, reset, timed out, invalid), by API name (id where names repeat) and target origin',
    type: 'counter',
    aggregator: 'sum',
    read: (target) => target.failures,
  },
  {
    name: 'quotagate_upstream_target_retries_total',
    help: 'Exchanges sent to the target of a pool API after another target failed them, by API name (id where names repeat) and target origin',
    type: 'counter',
    aggregator: 'sum',
    read: (target) => target.retries,
  },
];

/**
 * Registers the per-target families of the pool APIs (`upstream: { targets }`) on `registry`, read off
 * the state the pools hold at scrape time (`upstreams`): nothing is counted for them on the request path
 * beyond the pool's own counts, and an API of one URL has none.
 */
export function registerTargetMetrics(registry: Registry, upstreams: () => readonly ApiUpstream[]): void {
  // The registry reads any object with prom-client's get() and reset(); its Metric type is the class.
  for (const family of families)
    registry.registerMetric({
      name: family.name,
      help: family.help,
      type: family.type,
      aggregator: family.aggregator,
      get: () => ({
        name: family.name,
        help: family.help,
        type: family.type,
        aggregator: family.aggregator,
        values: valuesOf(family, upstreams()),
      }),
      reset: () => undefined,
    } as unknown as Metric);
}

function valuesOf(family: TargetFamily, upstreams: readonly ApiUpstream[]) {
  const pools = upstreams.filter((api) => api.balance !== null);
  const labels = uniqueLabels(pools.map(({ api, name }) => ({ id: api, name })));
  return pools.flatMap((api) =>
    api.targets.map((target) => ({
      labels: { api: labels.get(api.api)!, target: new URL(target.url).origin },
      value: family.read(target),
    })),
  );
}
