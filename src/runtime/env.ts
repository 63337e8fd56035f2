import { systemClock, type Clock } from '../kit/clock.js';
import type { LogSecrets, Logger } from '../observe/log.js';
import type { ConfigSource } from '../reload/config-source.js';
import { systemResolver, type HostResolver } from '../upstream/target-addresses.js';

/**
 * What a gateway process takes from outside besides its config: time, the log, the secrets the log keeps
 * out, the folder relative paths are resolved against. Time enters here, once: every part that reads it
 * is handed this clock (or `countersNow`), and none reads `Date.now()` itself.
 */
export interface Env {
  /** The caches', timers' and durations' clock: the system's unless a test moves it. */
  clock: Clock;
  /**
   * The counters' clock when a test moves it; null keeps the store's own (the memory store reads
   * `clock`, the Redis store its server's time).
   */
  countersNow: (() => number) | null;
  /**
   * The clock of what the fleet's processes do together on real time, which tests do not move: the
   * heartbeat, the hand-over of rejections, the limiter's probes, the shared store's leases, the pool's
   * restarts.
   */
  fleetClock: Clock;
  logger: Logger;
  /** The values the logger keeps out of its lines: a reload adds the new config's. */
  secrets: LogSecrets | null;
  /** Folder that relative paths of the config (tls.key, store.file, APIKeyAuthPlugin) are resolved against. */
  cwd: string;
  /**
   * Resolves the host names of the pools' targets each `upstream.dnsRefresh`: the system's (getaddrinfo,
   * as Node's connections resolve) unless a test answers.
   */
  resolveHost: HostResolver;
  /** The standard `OTEL_*` variables of the process, which `tracing` reads (docs/tracing.md). */
  otel: OtelVariables;
}

/** The OpenTelemetry variables tracing reads: only these enter the process from its environment. */
export const otelVariableNames = [
  'OTEL_SDK_DISABLED',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
  'OTEL_SERVICE_NAME',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
] as const;

export type OtelVariables = Readonly<Partial<Record<(typeof otelVariableNames)[number], string>>>;

/** How `startGateway` (src/server.ts) and the roles are started: the parts of an `Env`, as callers give them. */
export interface StartOptions {
  logger: Logger;
  /** Folder that relative paths of the config (tls.key, store.file, APIKeyAuthPlugin) are resolved against. */
  cwd?: string;
  /** Where a reload reads the config; without it, a reload is refused. */
  source?: ConfigSource;
  /** The values the logger keeps out of its lines: a reload adds the new config's. */
  secrets?: LogSecrets;
  /** Clock for caches, in milliseconds (tests move it). */
  now?: () => number;
  /** Clock of the counters, memory or Redis, in milliseconds (tests move it; Redis keeps its own otherwise). */
  clock?: () => number;
  /**
   * Timers of the open exchanges' once-a-second tick, the JWKS fetch timeout, the shutdown's grace period
   * and HTTP/2 connections' idle, keepalive and request bounds (tests move them).
   */
  timers?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  /** Resolves the host names of the pools' targets (tests answer for the system's resolver). */
  resolveHost?: HostResolver;
  /** The environment the `OTEL_*` variables are read from (the process's unless a test gives its own). */
  environment?: Readonly<Record<string, string | undefined>>;
}

/** The one place the clocks a caller gives become the process's `Env`. */
export function envOf(options: StartOptions): Env {
  const timers = options.timers ?? systemClock;
  return {
    clock: {
      now: options.now ?? systemClock.now,
      monotonic: systemClock.monotonic,
      setTimeout: (callback, ms) => timers.setTimeout(callback, ms),
      clearTimeout: (timer) => timers.clearTimeout(timer),
    },
    countersNow: options.clock ?? null,
    fleetClock: systemClock,
    logger: options.logger,
    secrets: options.secrets ?? null,
    cwd: options.cwd ?? process.cwd(),
    resolveHost: options.resolveHost ?? systemResolver,
    otel: otelVariablesOf(options.environment ?? process.env),
  };
}

function otelVariablesOf(environment: Readonly<Record<string, string | undefined>>): OtelVariables {
  const variables: Partial<Record<(typeof otelVariableNames)[number], string>> = {};
  for (const name of otelVariableNames) {
    const value = environment[name];
    if (value !== undefined && value !== '') variables[name] = value;
  }
  return variables;
}
