import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { createAdminServer, prepareAdminCertificates } from './admin/admin-server.js';
import type { Config } from './config/schema.js';
import type { LoadedConfig } from './config/load-config.js';
import {
  startDataPlaneHost,
  type HostParts,
  type ServingGateway,
  type StartOptions,
} from './data-plane-host.js';
import { latencyReport } from './observe/added-latency.js';
import { listenError } from './kit/listen-errors.js';
import { readTlsFiles } from './kit/tls-files.js';
import { quotaUsage } from './quota/quota-usage.js';

/** Opens the admin listener of `config` on `admin`; a port that cannot be had says which key moves it. */
export async function listenAdmin(admin: FastifyInstance, config: Config): Promise<number> {
  const { port, host } = config.admin;
  await admin.listen({ port, host }).catch((error: unknown) => {
    throw listenError(error, `the admin listener's port ${port}`, 'admin.port, or ADMIN_PORT,');
  });
  return (admin.server.address() as AddressInfo).port;
}

/**
 * One gateway in one thread: the data plane and its admin listener side by side, with the quota
 * definitions and the counters in the same heap. It is what tests start (they move its clocks), and what
 * a program embedding quotagate runs; `gateway start` runs the admin listener apart from the data plane
 * (src/workers/primary.ts), so that the data plane's heap holds none of the admin's libraries.
 */
export function startGateway(loaded: LoadedConfig, options: StartOptions): Promise<ServingGateway> {
  const cwd = options.cwd ?? process.cwd();
  return startDataPlaneHost(loaded, options, async (host: HostParts) => {
    const { live, gateway, repository, limiter } = host;
    const config = loaded.config;
    const admin = await createAdminServer({
      live,
      logger: options.logger,
      metrics: host.metrics,
      readiness: host.readiness,
      isDraining: host.isDraining,
      authDocumentation: () => gateway.dataPlane.authenticator.documentation,
      identify: (name) => gateway.dataPlane.authenticator.identify?.(name),
      repository,
      applicationRepository: host.applicationRepository,
      usage: (quotaId) => quotaUsage(host.quotas(), limiter, repository, quotaId),
      rejections: host.rejectionsOf,
      ...(options.clock ? { now: options.clock } : {}),
      dataPlane: host.dataPlane,
      latency: async () => latencyReport([host.latency.encoded()]),
      ...(config.admin.tls ? { tls: readTlsFiles(config.admin.tls, cwd) } : {}),
    });
    return {
      listen: () => listenAdmin(admin, config),
      prepareReload: (next, kept) => prepareAdminCertificates(admin, next.config, kept, cwd),
      close: () => admin.close(),
    };
  });
}
