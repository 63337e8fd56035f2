import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { createAdminServer, prepareAdminCertificates } from '../admin/admin-server.js';
import type { Authenticator } from '../auth/authenticator.js';
import type { LiveConfig } from '../config/live-config.js';
import type { LoadedConfig } from '../config/load-config.js';
import type { Config } from '../config/schema.js';
import type { DataPlaneAddress } from '../gateway/data-plane-address.js';
import { listenError } from '../kit/listen-errors.js';
import { readTlsFiles } from '../kit/tls-files.js';
import type { Limiter } from '../limiter/limiter.js';
import type { LatencyReport } from '../observe/added-latency.js';
import type { Metrics } from '../observe/metrics.js';
import type { ReadinessCheck } from '../observe/readiness.js';
import { apisWithoutTarget, type ApiUpstream } from '../console/logic/upstreams.js';
import type { RejectionSource } from '../observe/rejection-history.js';
import type { QuotaIndex } from '../quota/quota-index.js';
import { quotaUsage } from '../quota/quota-usage.js';
import type { Closers } from './closers.js';
import type { Env } from './env.js';
import type { OwnedStores } from './open-stores.js';
import type { UsageHistoryStore } from '../quota/usage-history.js';

/**
 * What the admin listener serves, as the role has it: one thread reads its own data plane; a primary
 * asks its workers (their rejections, latency and metrics) and reads the counters where they are.
 */
export interface ControlPlaneParts {
  live: LiveConfig;
  metrics: Metrics;
  readiness: ReadinessCheck[];
  isDraining(): boolean;
  owned: OwnedStores;
  quotas(): QuotaIndex;
  /** The scheme of `APIKeyAuthType` in force: the catalog documents it. */
  authenticator(): Authenticator;
  /** The scheme in force asked what a name stands for (ldap, wherever the config names it), if any. */
  directory(): Authenticator | undefined;
  /** Where the usage of a quota's counters is read. */
  counters: Pick<Limiter, 'usage'>;
  rejections: RejectionSource;
  latency(): Promise<LatencyReport>;
  /** The text of `/metrics` when it is more than this process's registry's. */
  metricsText?: () => Promise<string>;
  /** The data plane's ports, for the console's test requests; null before it listens. */
  dataPlane(): DataPlaneAddress | null;
  /** The targets of the APIs and what the data planes know of them now. */
  upstreams(): Promise<ApiUpstream[]>;
  /** The store's usage history. */
  usageHistory: UsageHistoryStore | null;
}

/** A built control plane: its listener, and the admin certificates a reload sets. */
export interface BuiltControlPlane {
  /** Opens the admin listener: the port it got. */
  listen(): Promise<number>;
  /** Reads the admin certificates a reload to `next` sets (an unreadable one refuses it); returns what sets them. */
  prepareReload(next: LoadedConfig, kept: readonly string[]): () => void;
}

/**
 * Builds the admin listener (Quota API, console, health, readiness, metrics) of a process that owns the
 * quota definitions, and pushes its closer. The only module of runtime/ that reaches admin/ (and fastify):
 * a data plane run apart never imports it.
 */
export async function buildControlPlane(
  loaded: LoadedConfig,
  env: Env,
  parts: ControlPlaneParts,
  closers: Closers,
): Promise<BuiltControlPlane> {
  const { config } = loaded;
  const { owned } = parts;
  const admin = await createAdminServer({
    live: parts.live,
    logger: env.logger,
    metrics: parts.metrics,
    readiness: [...parts.readiness, upstreamsReadiness(parts.upstreams)],
    isDraining: parts.isDraining,
    authDocumentation: () => parts.authenticator().documentation,
    identify: (name) => parts.directory()?.identify?.(name),
    repository: owned.quotas,
    applicationRepository: owned.applications,
    usage: (quotaId) =>
      quotaUsage(
        parts.quotas(),
        parts.counters,
        owned.quotas,
        quotaId,
        env.countersNow ?? env.fleetClock.now,
      ),
    rejections: parts.rejections,
    ...(env.countersNow ? { now: env.countersNow } : {}),
    dataPlane: parts.dataPlane,
    ...(parts.metricsText ? { metricsText: parts.metricsText } : {}),
    latency: parts.latency,
    upstreams: parts.upstreams,
    usageHistory: parts.usageHistory,
    ...(config.admin.tls ? { tls: readTlsFiles(config.admin.tls, env.cwd) } : {}),
  });
  closers.push('admin listener', () => admin.close());
  return {
    listen: () => listenAdmin(admin, config),
    prepareReload: (next, kept) => prepareAdminCertificates(admin, next.config, kept, env.cwd),
  };
}

/**
 * Ready while each API of a pool has a target its health checks find healthy: a gateway that can reach
 * no target of an API answers its clients 503 (a pool without `healthCheck` is never found out).
 */
function upstreamsReadiness(upstreams: () => Promise<ApiUpstream[]>): ReadinessCheck {
  return { name: 'upstreams', ready: async () => apisWithoutTarget(await upstreams()).length === 0 };
}

/** Opens the admin listener of `config` on `admin`; a port that cannot be had says which key moves it. */
async function listenAdmin(admin: FastifyInstance, config: Config): Promise<number> {
  const { port, host } = config.admin;
  await admin.listen({ port, host }).catch((error: unknown) => {
    throw listenError(error, `the admin listener's port ${port}`, 'admin.port, or ADMIN_PORT,');
  });
  return (admin.server.address() as AddressInfo).port;
}
