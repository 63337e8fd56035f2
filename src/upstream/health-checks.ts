import { Agent, request, type Dispatcher } from 'undici';
import { upstreamTargets, type ApiConfig, type HealthCheckConfig } from '../config/schema.js';
import type { Clock } from '../kit/clock.js';
import type { Logger } from '../observe/log.js';
import { checkGrpcHealth } from './grpc-health-check.js';
import { noAddresses, resolvedTargets, type AddressesOf } from './target-addresses.js';
import {
  noUpstreamTls,
  tlsOfTarget,
  upstreamConnector,
  type UpstreamTls,
  type UpstreamTlsByApi,
} from './upstream-tls.js';

/** What this gateway's health checks found of one target. */
export interface TargetHealth {
  /** Whether it takes exchanges: true until `unhealthyAfter` checks in a row fail. */
  healthy: boolean;
  /** Checks in a row that failed, or that passed, up to now. */
  failures: number;
  successes: number;
}

interface Check {
  readonly api: string;
  /** Its API is of protocol 'grpc': it is checked by the gRPC health checking protocol, not a GET. */
  readonly grpc: boolean;
  readonly origin: string;
  /** The Host of its GET: the name `origin`'s address was resolved from; null when `origin` is as configured. */
  readonly host: string | null;
  readonly health: TargetHealth;
  config: HealthCheckConfig;
  /** Its API's TLS to the target (upstream-tls.ts), as the exchanges have it. */
  tls: UpstreamTls | null;
  /** The timer of the next check. */
  timer: unknown;
  /** The check under way, if any. */
  running: Promise<void> | null;
  /** Stops the check under way (a timeout, a reload that drops the target, the close). */
  abort: AbortController | null;
}

/**
 * The active health checks of the pools' targets, from this gateway: a GET of `healthCheck.path` at
 * each target's origin (for a gRPC API, a `grpc.health.v1.Health/Check` of `healthCheck.service`:
 * grpc-health-check.ts) every `interval` ms, the first as the target is configured. A target is out
 * after `unhealthyAfter` failures in a row (an answer not 2xx or not SERVING, no whole answer within
 * `timeout`, a connection refused or cut) and back after `healthyAfter` successes in a row. Time is the
 * injected timers'.
 *
 * The state of a target is kept by its API's id and its origin, so that a reload that keeps a target
 * keeps what was found of it (and the pools it builds read the same `TargetHealth`).
 */
export class HealthChecks {
  private readonly checks = new Map<string, Check>();
  /** The checks' own connections, apart from the exchanges' pools (a check never waits behind one). */
  private readonly agent = new Agent({ pipelining: 1, connections: 1 });
  /** The connections of the checks of targets with upstream TLS, by the identity of their settings. */
  private readonly tlsAgents = new Map<string, Agent>();

  constructor(
    private readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
    private readonly logger: Logger,
  ) {}

  /**
   * The health of `origin` as a target of API `apiId`: the checks' state when it is checked, else one
   * that stays healthy.
   */
  stateOf(apiId: string, origin: string): TargetHealth {
    return this.checks.get(keyOf(apiId, origin))?.health ?? { healthy: true, failures: 0, successes: 0 };
  }

  /**
   * Checks the targets of `apis` that have a `healthCheck` (each address of a name `addressesOf` knows):
   * new ones from now, those already checked with what they were found to be (under their new settings,
   * `upstreamTls` among them), and no more those that are gone.
   */
  watch(
    apis: readonly ApiConfig[],
    upstreamTls: UpstreamTlsByApi = noUpstreamTls,
    addressesOf: AddressesOf = noAddresses,
  ): void {
    const wanted = new Map<string, Pick<Check, 'api' | 'grpc' | 'origin' | 'host' | 'config' | 'tls'>>();
    for (const api of apis) {
      if (typeof api.upstream === 'string' || api.upstream.healthCheck === undefined) continue;
      for (const { origin, host } of resolvedTargets(upstreamTargets(api.upstream), addressesOf)) {
        const tls = tlsOfTarget(upstreamTls, api.id, origin);
        wanted.set(keyOf(api.id, origin), {
          api: api.id,
          grpc: api.protocol === 'grpc',
          origin,
          host,
          config: api.upstream.healthCheck,
          tls,
        });
      }
    }
    for (const [key, check] of this.checks)
      if (!wanted.has(key)) {
        this.stop(check);
        this.checks.delete(key);
      }
    for (const [key, target] of wanted) {
      const known = this.checks.get(key);
      if (known) {
        known.config = target.config;
        known.tls = target.tls;
        continue;
      }
      const health: TargetHealth = { healthy: true, failures: 0, successes: 0 };
      const check: Check = { ...target, health, timer: null, running: null, abort: null };
      this.checks.set(key, check);
      this.run(check);
    }
    this.closeUnusedTlsAgents();
  }

  /** Resolves once the checks under way have ended (tests move the clock, then wait for the checks' I/O). */
  async idle(): Promise<void> {
    await Promise.all([...this.checks.values()].map(({ running }) => running));
  }

  /** Stops every check and closes their connections. */
  async close(): Promise<void> {
    for (const check of this.checks.values()) this.stop(check);
    this.checks.clear();
    const agents = [this.agent, ...this.tlsAgents.values()];
    this.tlsAgents.clear();
    await Promise.all(agents.map((agent) => agent.destroy()));
  }

  /** The connections a check of a target with `tls` goes on: apart from those of other settings. */
  private dispatcherOf(tls: UpstreamTls | null): Dispatcher {
    if (tls === null) return this.agent;
    let agent = this.tlsAgents.get(tls.identity);
    if (agent === undefined) {
      // undici's own connect timeout; the check's `timeout` bounds it anyway.
      agent = new Agent({ pipelining: 1, connections: 1, connect: upstreamConnector(tls, 10_000) });
      this.tlsAgents.set(tls.identity, agent);
    }
    return agent;
  }

  /** Closes, once their checks under way end, the connections of settings no check has any more. */
  private closeUnusedTlsAgents(): void {
    const used = new Set([...this.checks.values()].flatMap(({ tls }) => (tls ? [tls.identity] : [])));
    for (const [identity, agent] of this.tlsAgents)
      if (!used.has(identity)) {
        this.tlsAgents.delete(identity);
        void agent.close();
      }
  }

  private stop(check: Check): void {
    this.timers.clearTimeout(check.timer);
    check.abort?.abort(new Error('the health check was stopped'));
  }

  /** Runs a check (unless the one before is still under way) and sets the timer of the next. */
  private run(check: Check): void {
    check.timer = this.timers.setTimeout(() => this.run(check), check.config.interval);
    if (check.running !== null) return;
    check.running = this.probe(check).then((passed) => {
      check.running = null;
      check.abort = null;
      if (this.checks.get(keyOf(check.api, check.origin)) === check) this.record(check, passed);
    });
  }

  /** One check: whether a good answer (2xx, or SERVING) came, whole, within `timeout`. */
  private async probe(check: Check): Promise<boolean> {
    const abort = new AbortController();
    check.abort = abort;
    const timeout = this.timers.setTimeout(
      () => abort.abort(new Error('the health check timed out')),
      check.config.timeout,
    );
    try {
      if (check.grpc) {
        const { origin, host, tls } = check;
        return await checkGrpcHealth({
          origin,
          host,
          tls,
          service: check.config.service ?? '',
          signal: abort.signal,
        });
      }
      // The config's rules give every check of an HTTP API its path.
      const { statusCode, body } = await request(`${check.origin}${check.config.path ?? '/'}`, {
        method: 'GET',
        ...(check.host === null ? {} : { headers: { host: check.host } }),
        dispatcher: this.dispatcherOf(check.tls),
        signal: abort.signal,
      });
      await body.dump();
      return statusCode >= 200 && statusCode < 300;
    } catch {
      return false;
    } finally {
      this.timers.clearTimeout(timeout);
    }
  }

  private record(check: Check, passed: boolean): void {
    const { health, config } = check;
    health.failures = passed ? 0 : health.failures + 1;
    health.successes = passed ? health.successes + 1 : 0;
    if (health.healthy && health.failures >= config.unhealthyAfter) {
      health.healthy = false;
      this.logger.warn(
        { api: check.api, target: check.origin, failures: health.failures },
        'upstream target out: its health checks fail',
      );
    } else if (!health.healthy && health.successes >= config.healthyAfter) {
      health.healthy = true;
      this.logger.info(
        { api: check.api, target: check.origin, successes: health.successes },
        'upstream target back: its health checks pass',
      );
    }
  }
}

const keyOf = (apiId: string, origin: string) => `${apiId} ${origin}`;
