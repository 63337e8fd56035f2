import { AggregatorRegistry, Counter, Gauge, type Registry } from 'prom-client';
import { beforeDeadline, deadlinePassed } from '../deadline.js';
import type { IpcPeer, MetricsJson } from './ipc-peer.js';

/**
 * The families a primary of `workers: N` reports of itself: its own process, the memory store's counters
 * it holds for the workers, and its workers. Every other family is the workers'.
 */
const primaryFamily =
  /^quotagate_(?:process_|nodejs_|counter_memory_reserved_bytes$|counter_store_full_total$|workers_|worker_)/;

/** How long a worker has to send its metrics; one that misses it is left out of that scrape. */
const workerAnswerMs = 2_000;

/**
 * The text of `/metrics` for `workers: N`: each family of every worker and of the primary aggregated as
 * its `aggregator` says (prom-client's AggregatorRegistry; a sum unless the family says otherwise), so
 * `quotagate_requests_total` counts the requests of all workers.
 */
export async function clusterMetricsText(primary: Registry, workers: readonly IpcPeer[]): Promise<string> {
  const answers = await Promise.all(
    workers.map(async (worker): Promise<MetricsJson | null> => {
      try {
        const json = await beforeDeadline(worker.request('metrics', null), workerAnswerMs);
        return json === deadlinePassed ? null : json;
      } catch {
        return null;
      }
    }),
  );
  const own = (await primary.getMetricsAsJSON()).filter((family) => primaryFamily.test(family.name));
  const all = [own, ...answers.filter((answer) => answer !== null)];
  return AggregatorRegistry.aggregate(all).metrics();
}

/** The primary's metrics of its workers. */
export function registerWorkerMetrics(registry: Registry, listening: () => number): Counter {
  new Gauge({
    name: 'quotagate_workers_listening',
    help: 'Worker processes (workers: N) serving the data plane now',
    registers: [registry],
    collect() {
      this.set(listening());
    },
  });
  return new Counter({
    name: 'quotagate_worker_restarts_total',
    help: 'Worker processes that exited and were replaced',
    registers: [registry],
  });
}
