import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { AuthDocumentation } from '../auth/authenticator.js';
import type { ApiConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { catalogOpenApi } from './catalog-openapi.js';

/** Something `/readyz` asks before it says the gateway can take traffic. */
export interface ReadinessCheck {
  name: string;
  ready(): Promise<boolean>;
}

export interface AdminServerParts {
  logger: Logger;
  metrics: Metrics;
  readiness: ReadinessCheck[];
  /** True once shutdown has begun: load balancers should stop sending traffic. */
  isDraining(): boolean;
  apis: readonly ApiConfig[];
  authDocumentation: AuthDocumentation;
}

/**
 * The admin listener: health, readiness, metrics and the OpenAPI description of the proxied APIs. It never
 * shares a port with the data plane.
 */
export function createAdminServer(parts: AdminServerParts): FastifyInstance {
  const app = Fastify({
    loggerInstance: parts.logger.child({ plane: 'admin' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 64 * 1024,
  });

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    const results = await Promise.all(
      parts.readiness.map(async (check) => [check.name, await check.ready()] as const),
    );
    const checks = Object.fromEntries(results.map(([name, ok]) => [name, ok ? 'ok' : 'unreachable']));
    const ready = !parts.isDraining() && results.every(([, ok]) => ok);
    return reply
      .code(ready ? 200 : 503)
      .send({ status: ready ? 'ready' : parts.isDraining() ? 'draining' : 'not ready', checks });
  });

  app.get('/metrics', async (_request, reply) => {
    const body = await parts.metrics.registry.metrics();
    return reply.type(parts.metrics.registry.contentType).send(body);
  });

  const catalogDocument = catalogOpenApi(parts.apis, parts.authDocumentation);
  app.get('/api/portal/v1.3/apis/openapi.json', async () => catalogDocument);

  app.setNotFoundHandler((_request, reply) =>
    reply.code(404).send({ errors: [{ code: 404, message: 'Not Found' }] }),
  );
  return app;
}
