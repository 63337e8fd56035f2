import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The gateway's Prometheus metrics, on a registry of its own so that several gateways can share a process. */
export interface Metrics {
  registry: Registry;
  requests: Counter<'api' | 'method' | 'status'>;
  duration: Histogram<'api'>;
  upstreamErrors: Counter<'api' | 'outcome'>;
  quotaDecisions: Counter<'quota' | 'restriction' | 'decision'>;
  counterStoreShared: Gauge;
  counterStoreSwitches: Counter<'to'>;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'quotagate_' });
  return {
    registry,
    requests: new Counter({
      name: 'quotagate_requests_total',
      help: 'Requests answered on the data plane, by API id, method id and status',
      labelNames: ['api', 'method', 'status'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'quotagate_request_duration_seconds',
      help: 'Time from request to the end of the response, by API id',
      labelNames: ['api'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    upstreamErrors: new Counter({
      name: 'quotagate_upstream_errors_total',
      help: 'Upstream exchanges that failed, by API id and outcome (unreachable, timeout, reset)',
      labelNames: ['api', 'outcome'],
      registers: [registry],
    }),
    quotaDecisions: new Counter({
      name: 'quotagate_quota_decisions_total',
      help: 'Quota checks by quota id, restriction index and decision (allowed, rejected)',
      labelNames: ['quota', 'restriction', 'decision'],
      registers: [registry],
    }),
    counterStoreShared: new Gauge({
      name: 'quotagate_counter_store_shared',
      help: '1 while the shared (Redis) counters decide, 0 while store.onError does',
      registers: [registry],
    }),
    counterStoreSwitches: new Counter({
      name: 'quotagate_counter_store_switches_total',
      help: 'Switches between the shared counters and the store.onError policy, by what took over',
      labelNames: ['to'],
      registers: [registry],
    }),
  };
}
