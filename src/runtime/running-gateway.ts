import type { CounterUsage } from '../limiter/counter-store.js';
import type { EncodedLatency } from '../observe/added-latency.js';
import type { Metrics } from '../observe/metrics.js';
import type { ApiUpstream } from '../console/logic/upstreams.js';
import type { RestrictionRejections } from '../observe/rejection-history.js';
import type { DataPlaneAddress } from '../gateway/data-plane-address.js';
import type { ReloadOutcome } from '../reload/config-reloader.js';

export interface RunningGateway {
  /** Bound ports: useful when the config asked for port 0. No `http` with `port: false`, no `https` without `tls`. */
  ports: DataPlaneAddress & { admin: number };
  /** Graceful shutdown: stop accepting, let in-flight requests finish within `shutdownTimeout`, close all. */
  close(): Promise<void>;
  /** This process's metrics (a worker's, for its primary to aggregate). */
  metrics: Metrics;
  /**
   * Reads conf/ again and puts it in force for the requests that come next (SIGHUP, `gateway reload`);
   * a config with mistakes is refused whole. Never rejects.
   */
  reload(): Promise<ReloadOutcome>;
  /** Hands the access lines gathered so far to their destination. */
  flushLogs(): void;
  /** Flushes the access lines, and opens `accessLog.file` again after logrotate moved it (SIGUSR2). */
  reopenLogs(): void;
}

/** A gateway that serves the data plane itself (one process, or a worker of `workers: N`). */
export interface ServingGateway extends RunningGateway {
  /** The time this process added to exchanges, for its primary to add up. */
  latency(): EncodedLatency;
  /**
   * A worker's part of a quota's rejection history, for its primary to add up: all of it with the
   * memory store; with Redis, nothing (it hands its history over to the fleet's store first).
   */
  rejectionsOf(quotaId: string): Promise<RestrictionRejections[]>;
  /** What the counters this process holds count under `keyPrefix` (the memory store of one data plane). */
  usage(keyPrefix: string, windowMs: number): Promise<CounterUsage[]>;
  /** The targets of the APIs in force and what this data plane knows of them now, for its primary. */
  upstreams(): ApiUpstream[];
}

/** The data plane's ports of `ports`, for the console's test requests. */
export function dataPlaneAddress(ports: RunningGateway['ports']): DataPlaneAddress {
  return {
    ...(ports.http === undefined ? {} : { http: ports.http }),
    ...(ports.https === undefined ? {} : { https: ports.https }),
  };
}
