import { AggregatorRegistry, Counter, Gauge, type Registry } from 'prom-client';
import { askWorkers } from './ask-workers.js';
import type { IpcPeer } from './ipc-peer.js';

/**
 * The families a primary of `workers: N` reports of itself: its own process, the memory store's counters
 * it holds for the workers (their memory, the requests refused and the shadow counts dropped at its
 * bound), and its workers. Every other family is the workers'.
 */
const primaryFamily =
  /^quotagate_(?:process_|nodejs_|store_memory_reserved_bytes$|store_full_total$|shadow_counts_dropped_total$|workers_|worker_)/;

/** The families of the whole process, which a data-plane thread reports as well as its primary. */
const processFamily = /^quotagate_process_/;

/**
 * The text of `/metrics` for `workers: N`: each family of every worker and of the primary aggregated as
 * its `aggregator` says (prom-client's AggregatorRegistry; a sum unless the family says otherwise), so
 * `quotagate_requests_total` counts the requests of all workers. A worker that does not answer in time
 * is left out of that scrape. With `sameProcess` (the data-plane thread of `workers: 1`) the process
 * families are the primary's alone.
 */
export async function clusterMetricsText(
  primary: Registry,
  workers: readonly IpcPeer[],
  { sameProcess }: { sameProcess: boolean },
): Promise<string> {
  const answers = await askWorkers(workers, 'metrics', null);
  const own = (await primary.getMetricsAsJSON()).filter((family) => primaryFamily.test(family.name));
  // A thread reads the CPU, memory and file descriptors of the whole process, as the primary does: once.
  const theirs = sameProcess
    ? answers.map((families) => families.filter((family) => !processFamily.test(family.name)))
    : answers;
  const all = [own, ...theirs];
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
