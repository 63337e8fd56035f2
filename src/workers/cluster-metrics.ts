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
 * The primary reads the config first on every reload and asks its workers only once it has taken it:
 * a reload it refused reaches no worker. So the count of reloads is the primary's alone (each reload
 * once, whatever the number of workers), and the gauge of the last one is the primary's and every
 * worker's together (their `min`: 0 when the primary or one worker refused it).
 */
const reloadCount = 'quotagate_config_reloads_total';
const reloadFamily = /^quotagate_config_(?:reloads_total|last_reload_successful)$/;

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
  const own = (await primary.getMetricsAsJSON()).filter(
    (family) => primaryFamily.test(family.name) || reloadFamily.test(family.name),
  );
  // A thread reads the CPU, memory and file descriptors of the whole process, as the primary does: once.
  const theirs = answers.map((families) =>
    families.filter(
      (family) => family.name !== reloadCount && !(sameProcess && processFamily.test(family.name)),
    ),
  );
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
