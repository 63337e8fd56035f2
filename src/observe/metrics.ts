import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { latencyParts, type AddedLatency } from './added-latency.js';
import { RejectionHistory } from './rejection-history.js';

/** The gateway's Prometheus metrics, on a registry of its own so that several gateways can share a process. */
export interface Metrics {
  registry: Registry;
  upstreamErrors: Counter<'api' | 'outcome'>;
  counterStoreShared: Gauge;
  counterStoreSwitches: Counter<'to'>;
  /** Requests refused because a counter they need would pass store.maxCounterMemoryMb. */
  jwksFetches: Counter<'result'>;
  counterStoreFull: Counter;
  counterStoreTrips: Counter;
  counterStoreLiveGateways: Gauge;
  /** Log lines dropped because more than `maxWaitingLogBytes` waited for stdout or the access log file. */
  logLinesDropped: Counter;
  /** Spans dropped by reason: queue_full (tracing.maxQueueSize waited), export_failed (the collector). */
  tracingSpansDropped: Counter<'reason'>;
  /** Shadow counts dropped to make room for an enforced restriction's new counter (store.maxCounterMemoryMb). */
  shadowCountsDropped: Counter;
  /** Answers read after their clients left that were cut to make room for newer ones (upstreamDrainLimit). */
  upstreamDrainsCut: Counter;
  /** Reloads of conf/ by result: applied, or refused (the running config stayed). */
  configReloads: Counter<'result'>;
  /** 1 when the last reload was applied (or none was asked for), 0 when it was refused. */
  configLastReloadSuccessful: Gauge;
  /** Alert deliveries to webhooks by result: delivered (a 2xx), retried (an attempt that failed), given_up. */
  notificationsSent: Counter<'result'>;
  /** Alerts dropped, oldest first, because a webhook's queue was full while it failed. */
  notificationsDropped: Counter;
  /** Counts one answered request and observes its duration. */
  request(api: string, method: string, status: number, seconds: number): void;
  /** Counts one quota decision of one restriction (a rejection also goes into `rejections`). */
  quotaDecision(restriction: { quotaId: string; quotaLabel: string; index: number }, allowed: boolean): void;
  /** Counts a request a shadow restriction would have refused (it also goes into `rejections`). */
  shadowRefusal(restriction: { quotaId: string; quotaLabel: string; index: number }): void;
  /** Counts an exchange whose answer said no whole number of units where a throttleunits restriction reads one. */
  unitsUnreadable(restriction: { quotaLabel: string; index: number }): void;
  /** Counts a request a shadow restriction did not count: its counter found no room under the memory bound. */
  shadowUncounted(restriction: { quotaLabel: string; index: number }): void;
  /** Recent rejections per restriction, for the console's sparklines. */
  rejections: RejectionHistory;
}

/**
 * Child metrics looked up through nested maps of label values: prom-client would otherwise hash a label
 * object on every call of the request path, and a joined key would build a string per call.
 */
class Children<T> {
  private readonly byFirst = new Map<string, Map<string, Map<string, T>>>();

  constructor(private readonly make: (first: string, second: string, third: string) => T) {}

  get(first: string, second: string, third: string): T {
    let seconds = this.byFirst.get(first);
    if (!seconds) this.byFirst.set(first, (seconds = new Map()));
    let thirds = seconds.get(second);
    if (!thirds) seconds.set(second, (thirds = new Map()));
    let child = thirds.get(third);
    if (!child) thirds.set(third, (child = this.make(first, second, third)));
    return child;
  }

  forEach(visit: (child: T) => void): void {
    for (const seconds of this.byFirst.values())
      for (const thirds of seconds.values()) for (const child of thirds.values()) visit(child);
  }
}

/**
 * A count kept as a plain number on the request path and handed to its prom-client counter at scrape
 * time: `inc()` on a prom-client child builds and validates a label key on every call.
 */
class Tally {
  count = 0;
  private reported = 0;

  constructor(private readonly labels: Record<string, string>) {}

  /** Adds what was counted since the last scrape to `counter`. */
  report(counter: Counter<string>): void {
    if (this.count === this.reported) return;
    counter.inc(this.labels, this.count - this.reported);
    this.reported = this.count;
  }
}

/** One value of a metric as prom-client's registry formats it. */
interface SeriesValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

/**
 * A Prometheus histogram of one label, kept as plain counts on the request path and handed to the
 * registry as prom-client's own histograms are at scrape time: prom-client's `observe()` builds a label
 * object and a hash string on every call. Aggregated across workers by sum, as prom-client's are.
 */
class PlainHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, { buckets: number[]; sum: number; count: number }>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly label: string,
    private readonly bounds: readonly number[],
  ) {}

  observe(labelValue: string, value: number): void {
    let series = this.series.get(labelValue);
    if (!series) {
      series = { buckets: new Array<number>(this.bounds.length).fill(0), sum: 0, count: 0 };
      this.series.set(labelValue, series);
    }
    let bucket = 0;
    while (bucket < this.bounds.length && value > this.bounds[bucket]!) bucket += 1;
    if (bucket < this.bounds.length) series.buckets[bucket]! += 1;
    series.sum += value;
    series.count += 1;
  }

  get(): { name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: SeriesValue[] } {
    const values: SeriesValue[] = [];
    for (const [labelValue, { buckets, sum, count }] of this.series) {
      let cumulative = 0;
      this.bounds.forEach((bound, i) => {
        cumulative += buckets[i]!;
        values.push({
          labels: { le: bound, [this.label]: labelValue },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        });
      });
      values.push(
        { labels: { le: '+Inf', [this.label]: labelValue }, value: count, metricName: `${this.name}_bucket` },
        { labels: { [this.label]: labelValue }, value: sum, metricName: `${this.name}_sum` },
        { labels: { [this.label]: labelValue }, value: count, metricName: `${this.name}_count` },
      );
    }
    return {
      name: this.name,
      help: this.help,
      type: 'histogram' as never,
      aggregator: this.aggregator,
      values,
    };
  }

  reset(): void {
    this.series.clear();
  }
}

/**
 * The time the gateway adds to each exchange (`AddedLatency`), as a Prometheus histogram by part
 * (request, response), read off its HdrHistograms at scrape time. Summed across workers, as prom-client's
 * histograms are: the buckets of several processes add up exactly.
 */
class AddedLatencyHistogram {
  readonly name = 'quotagate_added_latency_seconds';
  readonly help =
    "Time the gateway adds to an exchange: from the request's arrival to the upstream request (part=request), and from the upstream response's head to the client response's head (part=response)";
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private static readonly bounds = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    1,
  ];

  constructor(private readonly latency: AddedLatency) {}

  get(): { name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: SeriesValue[] } {
    const values: SeriesValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const part of latencyParts) {
      const { counts, count, sum } = this.latency.buckets(part, AddedLatencyHistogram.bounds);
      AddedLatencyHistogram.bounds.forEach((bound, i) => {
        values.push({ labels: { le: bound, part }, value: counts[i]!, metricName: bucket });
      });
      values.push(
        { labels: { le: '+Inf', part }, value: count, metricName: bucket },
        { labels: { part }, value: sum, metricName: `${this.name}_sum` },
        { labels: { part }, value: count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: 'histogram' as never, aggregator: 'sum', values };
  }

  reset(): void {
    // Read off the gateway's histograms: nothing of its own to reset.
  }
}

/** Label values of statuses and restriction indexes, made once instead of per request. */
const statusText = Array.from({ length: 600 }, (_, status) => String(status));
const indexText = Array.from({ length: 64 }, (_, index) => String(index));
/** A restriction index as a label value, without making a string for the usual few. */
const indexLabel = (index: number): string => indexText[index] ?? String(index);

export interface MetricsSources {
  /** Bytes this gateway's own counters reserve now, read on each scrape. */
  counterMemoryBytes?: () => number;
  /** The clock of the rejection history (tests move it). */
  now?: () => number;
  /** The time this gateway adds to exchanges; absent in a primary of `workers: N`, whose workers add it up. */
  addedLatency?: AddedLatency;
  /**
   * This gateway decides with shared counters (Redis, or the primary's with `workers: N`), and so
   * exports `quotagate_store_shared`: without them its own counters are all there is, and a 0 would say
   * that store.onError decides.
   */
  sharedCounters?: boolean;
  /**
   * This thread's event loop does no data-plane work (the admin listener's, beside a data-plane thread):
   * its delay is not sampled, and the `quotagate_nodejs_eventloop_lag_*` families are the data plane's
   * alone. prom-client samples the delay with a timer every 10 ms, which wakes an idle loop 100 times a
   * second: about 9 ms of CPU a second on the bench's machine (issue 35), for a loop nobody waits on.
   */
  withoutEventLoopDelay?: boolean;
}

/** The families prom-client makes of its event-loop delay sampler. */
const eventLoopDelayFamily = /^quotagate_nodejs_eventloop_lag_/;
/**
 * A sampler's period that never comes (the largest a timer takes: about 24.8 days): prom-client starts
 * its sampler whatever it is asked, and only its period can be chosen.
 */
const neverMs = 2 ** 31 - 1;

export function createMetrics(sources: MetricsSources = {}): Metrics {
  const registry = new Registry();
  const rejections = new RejectionHistory(sources.now);
  new Gauge({
    name: 'quotagate_store_memory_reserved_bytes',
    help: "Bytes reserved by this gateway's own counters, against store.maxCounterMemoryMb",
    registers: [registry],
    collect() {
      this.set(sources.counterMemoryBytes?.() ?? 0);
    },
  });
  collectDefaultMetrics({
    register: registry,
    prefix: 'quotagate_',
    ...(sources.withoutEventLoopDelay ? { eventLoopMonitoringPrecision: neverMs } : {}),
  });
  // prom-client counts active handles, requests and resources twice: by type, and as a gauge named
  // `…_total`, which Prometheus' conventions keep for counters (promtool refuses it). The sum by type
  // says the same.
  for (const metric of registry.getMetricsAsArray()) {
    if (metric instanceof Gauge && metric.name.endsWith('_total')) registry.removeSingleMetric(metric.name);
    else if (sources.withoutEventLoopDelay && eventLoopDelayFamily.test(metric.name))
      registry.removeSingleMetric(metric.name);
  }
  const requestTallies = new Children((api, method, status) => new Tally({ api, method, status }));
  new Counter({
    name: 'quotagate_requests_total',
    help: 'Requests answered on the data plane, by API name, method name (ids where names repeat) and status',
    labelNames: ['api', 'method', 'status'],
    registers: [registry],
    collect() {
      requestTallies.forEach((tally) => tally.report(this));
    },
  });
  const duration = new PlainHistogram(
    'quotagate_request_duration_seconds',
    'Time from request to the end of the response, by API name (id where names repeat)',
    'api',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  );
  // The registry reads any object with prom-client's get() and reset(); its Metric type is the class.
  registry.registerMetric(duration as unknown as Metric);
  if (sources.addedLatency)
    registry.registerMetric(new AddedLatencyHistogram(sources.addedLatency) as unknown as Metric);
  const decisionTallies = new Children(
    (quota, restriction, decision) => new Tally({ quota, restriction, decision }),
  );
  // Not on the path of every request: only where a shadow restriction has no room.
  const shadowRefusals = new Counter({
    name: 'quotagate_shadow_refusals_total',
    help: 'Requests a shadow restriction would have refused (each went through), by quota name (id where names repeat) and restriction index',
    labelNames: ['quota', 'restriction'],
    registers: [registry],
  });
  const unitsUnreadable = new Counter({
    name: 'quotagate_units_unreadable_total',
    help: 'Exchanges whose answer said no whole number of units in the header, trailer or body a throttleunits restriction reads, or could not be read to its end (charged its default), by quota name (id where names repeat) and restriction index',
    labelNames: ['quota', 'restriction'],
    registers: [registry],
  });
  const shadowUncounted = new Counter({
    name: 'quotagate_shadow_uncounted_total',
    help: "Requests a shadow restriction did not count (each went through) because its counter found no room under this gateway's store.maxCounterMemoryMb, by quota name (id where names repeat) and restriction index",
    labelNames: ['quota', 'restriction'],
    registers: [registry],
  });
  // The tallies of a restriction, found through the restriction itself: one lookup per decision.
  const decisionsOf = new WeakMap<object, { allowed: Tally; rejected: Tally }>();
  new Counter({
    name: 'quotagate_quota_decisions_total',
    help: 'Quota checks by quota name (id where names repeat), restriction index and decision (allowed, rejected)',
    labelNames: ['quota', 'restriction', 'decision'],
    registers: [registry],
    collect() {
      decisionTallies.forEach((tally) => tally.report(this));
    },
  });
  return {
    registry,
    upstreamErrors: new Counter({
      name: 'quotagate_upstream_errors_total',
      help: 'Upstream exchanges that failed, by API name (id where names repeat) and outcome (unreachable, timeout, reset, invalid)',
      labelNames: ['api', 'outcome'],
      registers: [registry],
    }),
    counterStoreShared: new Gauge({
      name: 'quotagate_store_shared',
      help: '1 while the shared counters (Redis, or the primary of workers: N) decide, 0 while store.onError does',
      registers: sources.sharedCounters ? [registry] : [],
      // Across the workers of `workers: N`: 0 as soon as one of them decides without the shared counters.
      aggregator: 'min',
    }),
    counterStoreSwitches: new Counter({
      name: 'quotagate_store_switches_total',
      help: 'Switches between the shared counters and the store.onError policy, by what took over',
      labelNames: ['to'],
      registers: [registry],
    }),
    counterStoreTrips: new Counter({
      name: 'quotagate_store_trips_total',
      help: 'Script calls this gateway made to the shared counters (checks its leases could not decide, measured bytes, give-backs)',
      registers: [registry],
    }),
    counterStoreLiveGateways: new Gauge({
      name: 'quotagate_store_live_gateways',
      help: 'Gateways of the fleet alive by their heartbeat in the shared store, as this one last saw them',
      registers: [registry],
      // Every worker of `workers: N` sees the same fleet: the sum would count it once per worker.
      aggregator: 'max',
    }),
    jwksFetches: new Counter({
      name: 'quotagate_jwks_fetches_total',
      help: "Fetches of the jwt scheme's JWK Set, by result: ok, failed (down, slow, malformed, over 1 MiB)",
      labelNames: ['result'],
      registers: [registry],
    }),
    counterStoreFull: new Counter({
      name: 'quotagate_store_full_total',
      help: "Requests refused (503) because a new counter would pass this gateway's store.maxCounterMemoryMb",
      registers: [registry],
    }),
    shadowCountsDropped: new Counter({
      name: 'quotagate_shadow_counts_dropped_total',
      help: "Counts of shadow restrictions dropped to make room for an enforced restriction's new counter under this gateway's store.maxCounterMemoryMb",
      registers: [registry],
    }),
    upstreamDrainsCut: new Counter({
      name: 'quotagate_upstream_drains_cut_total',
      help: 'Answers read to their end after their clients left (for their throttleunits charge) that were cut, oldest first, because upstreamDrainLimit of them were read at once; each is charged what its body said so far, else its default',
      registers: [registry],
    }),
    tracingSpansDropped: new Counter({
      name: 'quotagate_tracing_spans_dropped_total',
      help: 'Spans dropped by reason: queue_full (tracing.maxQueueSize waited), export_failed (the collector failed, answered late or not at all)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    logLinesDropped: new Counter({
      name: 'quotagate_log_lines_dropped_total',
      help: 'Log lines dropped because stdout or the access log file did not keep up (16 MiB of lines waiting)',
      registers: [registry],
    }),
    configReloads: new Counter({
      name: 'quotagate_config_reloads_total',
      help: 'Reloads of the config (SIGHUP, gateway reload) by result: applied, refused',
      labelNames: ['result'],
      registers: [registry],
    }),
    configLastReloadSuccessful: (() => {
      const gauge = new Gauge({
        name: 'quotagate_config_last_reload_successful',
        help: '1 when the last reload of the config was applied (or none was asked for), 0 when it was refused',
        registers: [registry],
        // Across the workers of `workers: N`: 0 as soon as one of them refused.
        aggregator: 'min',
      });
      gauge.set(1);
      return gauge;
    })(),
    notificationsSent: new Counter({
      name: 'quotagate_notifications_sent_total',
      help: 'Attempts to deliver an alert to a webhook (notifications.webhooks), by result: delivered (a 2xx answer), retried (any other answer or none; tried again later), given_up (the last of 10 attempts failed)',
      labelNames: ['result'],
      registers: [registry],
    }),
    notificationsDropped: new Counter({
      name: 'quotagate_notifications_dropped_total',
      help: 'Alerts dropped, oldest first, because 1000 waited for one webhook while it failed',
      registers: [registry],
    }),
    request(api, method, status, seconds) {
      requestTallies.get(api, method, statusText[status] ?? String(status)).count += 1;
      duration.observe(api, seconds);
    },
    quotaDecision(restriction, allowed) {
      let tallies = decisionsOf.get(restriction);
      if (!tallies) {
        const index = indexLabel(restriction.index);
        tallies = {
          allowed: decisionTallies.get(restriction.quotaLabel, index, 'allowed'),
          rejected: decisionTallies.get(restriction.quotaLabel, index, 'rejected'),
        };
        decisionsOf.set(restriction, tallies);
      }
      if (allowed) {
        tallies.allowed.count += 1;
      } else {
        tallies.rejected.count += 1;
        rejections.record(restriction.quotaId, restriction.index);
      }
    },
    shadowRefusal(restriction) {
      shadowRefusals.inc({
        quota: restriction.quotaLabel,
        restriction: indexLabel(restriction.index),
      });
      rejections.record(restriction.quotaId, restriction.index);
    },
    unitsUnreadable(restriction) {
      unitsUnreadable.inc({ quota: restriction.quotaLabel, restriction: indexLabel(restriction.index) });
    },
    shadowUncounted(restriction) {
      shadowUncounted.inc({ quota: restriction.quotaLabel, restriction: indexLabel(restriction.index) });
    },
    rejections,
  };
}
