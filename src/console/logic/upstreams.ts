/**
 * What a gateway knows of each API's upstream targets now: what the admin listener's `GET /upstreams`
 * answers (its zod schema, src/admin/upstream-routes.ts, is checked against these types), what a worker
 * answers its primary, what the target metrics and `/readyz` read, and what the console shows.
 */
export interface TargetState {
  /**
   * The target as configured (origin and path), or for each address its host name resolved to
   * (`upstream.dnsRefresh`), the configured URL with that address in place of the name.
   */
  url: string;
  /** The configured host (name and port) `url`'s address was resolved from; null when `url` is as configured. */
  host: string | null;
  /** Its share of the exchanges (1 for the one-URL form). */
  weight: number;
  /** Whether the health checks find it healthy (every data plane's); always true without healthCheck. */
  healthy: boolean;
  /** Whether outlier detection has it ejected now (any data plane's); false without outlierDetection. */
  ejected: boolean;
  /** Times outlier detection ejected it since the start. */
  ejections: number;
  /** Exchanges sent to it and not yet answered, now. */
  inFlight: number;
  /** Exchanges sent to it since the start, retries included. */
  requests: number;
  /** Exchanges to it that failed without an answer (refused, reset, timed out, invalid). */
  failures: number;
  /** Exchanges sent to it after another target failed them. */
  retries: number;
}

export interface ApiUpstream {
  /** The API's id. */
  api: string;
  name: string;
  /** The balance policy of a pool; null for the one-URL form. */
  balance: 'round-robin' | 'least-requests' | null;
  /** Whether its targets are health-checked. */
  healthCheck: boolean;
  targets: TargetState[];
}

/**
 * The states several data planes (the workers of a primary) report, as one gateway's: the counts and
 * exchanges in flight added up, and a target healthy only while every data plane's checks find it so.
 */
export function mergeUpstreams(answers: ReadonlyArray<readonly ApiUpstream[]>): ApiUpstream[] {
  const [first, ...others] = answers;
  if (first === undefined) return [];
  return first.map((api, apiIndex) => ({
    ...api,
    targets: api.targets.map((target) => {
      const merged = { ...target };
      for (const other of others) {
        // Each data plane resolves the targets' names itself: their addresses may differ for a while.
        const same = other[apiIndex]?.targets.find(({ url }) => url === target.url);
        if (same === undefined) continue;
        merged.healthy &&= same.healthy;
        merged.ejected ||= same.ejected;
        merged.ejections += same.ejections;
        merged.inFlight += same.inFlight;
        merged.requests += same.requests;
        merged.failures += same.failures;
        merged.retries += same.retries;
      }
      return merged;
    }),
  }));
}

/**
 * The names of the pool APIs whose every target the health checks find out: `/readyz` is not ready while
 * there is one (a gateway that can reach no target of an API is of no use to its clients).
 */
export function apisWithoutTarget(upstreams: readonly ApiUpstream[]): string[] {
  return upstreams
    .filter((api) => api.healthCheck && api.targets.every((target) => !target.healthy))
    .map((api) => api.name);
}

/** What the console says of an API's targets at a glance: `2 of 3 targets healthy, round-robin`. */
export function targetsSummary(upstream: ApiUpstream): string {
  if (upstream.balance === null) return 'One upstream URL';
  const healthy = upstream.targets.filter((target) => target.healthy).length;
  const checks = upstream.healthCheck ? '' : ' (no health checks)';
  return `${healthy} of ${upstream.targets.length} targets healthy${checks}, ${upstream.balance}`;
}
