import swagger from '@fastify/swagger';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
} from 'fastify';
import type { AuthDocumentation } from '../auth/authenticator.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { quotaApiSchemas } from '../quota/quota-schema.js';
import type { QuotaUsage } from '../quota/quota-usage.js';
import {
  QuotaConflict,
  QuotaNotFound,
  QuotaPreconditionFailed,
  QuotaStoreUnavailable,
  QuotaWriteFailed,
  type QuotaRepository,
} from '../quota/quota-repository.js';
import { AdminError, adminErrorStatuses, errorsBody, type AdminErrorStatus } from './admin-errors.js';
import { AdminUsers, type AdminUser } from './admin-users.js';
import { catalogOpenApi } from './catalog-openapi.js';
import { registerQuotaRoutes } from './quota-routes.js';
import { validationMessages, type ValidationIssue } from './validation-messages.js';

declare module 'fastify' {
  interface FastifyRequest {
    adminUser?: AdminUser;
  }
}

/** Something `/readyz` asks before it says the gateway can take traffic. */
export interface ReadinessCheck {
  name: string;
  ready(): Promise<boolean>;
}

export interface AdminServerParts {
  config: Readonly<Config>;
  logger: Logger;
  metrics: Metrics;
  readiness: ReadinessCheck[];
  /** True once shutdown has begun: load balancers should stop sending traffic. */
  isDraining(): boolean;
  authDocumentation: AuthDocumentation;
  repository: QuotaRepository;
  usage: (quotaId: string) => Promise<QuotaUsage | null>;
}

const portalPrefix = '/api/portal/v1.3';
const publicPaths = new Set([`${portalPrefix}/openapi.json`]);
const adminChallenge = 'Basic realm="quotagate admin", charset="UTF-8"';

/** The status and messages of any error a route or fastify itself raised. */
function describeError(error: FastifyError | Error): {
  status: AdminErrorStatus;
  messages: string[];
  headers?: Record<string, string>;
} {
  if (error instanceof AdminError)
    return { status: error.status, messages: [...error.messages], headers: error.headers };
  if (error instanceof QuotaNotFound) return { status: 404, messages: [error.message] };
  if (error instanceof QuotaPreconditionFailed) return { status: 412, messages: [error.message] };
  if (error instanceof QuotaConflict) return { status: 409, messages: [error.message] };
  if (error instanceof QuotaStoreUnavailable) return { status: 503, messages: [error.message] };
  if (error instanceof QuotaWriteFailed) return { status: 500, messages: [error.message] };
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    return {
      status: 400,
      messages: validationMessages(
        fastifyError.validation as ValidationIssue[],
        fastifyError.validationContext,
      ),
    };
  }
  const status = fastifyError.statusCode;
  if (status === 413) return { status, messages: ['the body is larger than 64 KiB'] };
  if (status === 415) return { status, messages: ['the body must be application/json'] };
  if (fastifyError.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return { status: 400, messages: ['body: not valid JSON, or it holds a __proto__ or constructor key'] };
  }
  if (status === 400) return { status, messages: [`body: ${error.message}`] };
  if (status !== undefined && status in adminErrorStatuses && status < 500) {
    return { status: status as AdminErrorStatus, messages: [error.message] };
  }
  return { status: 500, messages: [] };
}

/**
 * The admin listener: health, readiness, metrics, the portal Quota API with its two roles, and the
 * OpenAPI documents. It never shares a port with the data plane.
 */
export async function createAdminServer(parts: AdminServerParts): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: parts.logger.child({ plane: 'admin' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 64 * 1024,
    // Wrong JSON types are errors, not values to coerce, and unknown fields are errors, not to drop.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true } },
  });
  const users = new AdminUsers(parts.config.admin.users);
  // Many clients send Content-Type: application/json on every request, DELETE included: an empty body is
  // no body, not an error. Anything else goes to fastify's parser, which refuses __proto__ and constructor.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) =>
    body === '' ? done(null, undefined) : parseJson(request, String(body), done),
  );

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'quotagate portal Quota API',
        version: '1.3.0',
        description: 'Quotas: sets of restrictions (throttles) that apply to applications or APIs.',
      },
      servers: [{ url: '/' }],
      components: { securitySchemes: { basic: { type: 'http', scheme: 'basic' } } },
      security: [{ basic: [] }],
    },
    hideUntagged: true,
    // Components named by the schemas' own $id (QuotaDTO, Quota, …), not def-0, def-1, …
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  for (const schema of quotaApiSchemas) app.addSchema(schema);

  app.addHook('onRequest', async (request) => {
    if (!request.url.startsWith(`${portalPrefix}/`) || publicPaths.has(request.url.split('?')[0]!)) return;
    const user = await users.authenticate(request.raw);
    if (!user)
      throw new AdminError(401, ['admin credentials are missing or wrong'], {
        'www-authenticate': adminChallenge,
      });
    request.adminUser = user;
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const { status, messages, headers } = describeError(error);
    if (status === 500) request.log.error({ err: error }, 'admin request failed');
    if (headers) reply.headers(headers);
    return reply.code(status).type('application/json').send(errorsBody(status, messages));
  });
  app.setNotFoundHandler((_request, reply) => reply.code(404).send(errorsBody(404)));

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    const results = await Promise.all(
      parts.readiness.map(async (check) => [check.name, await check.ready()] as const),
    );
    const checks = Object.fromEntries(results.map(([name, ok]) => [name, ok ? 'ok' : 'unreachable']));
    const ready = !parts.isDraining() && results.every(([, ok]) => ok);
    const status = ready ? 'ready' : parts.isDraining() ? 'draining' : 'not ready';
    return reply.code(ready ? 200 : 503).send({ status, checks });
  });

  app.get('/metrics', async (_request, reply) => {
    const body = await parts.metrics.registry.metrics();
    return reply.type(parts.metrics.registry.contentType).send(body);
  });

  const catalogDocument = catalogOpenApi(parts.config.apis, parts.authDocumentation);
  await app.register(
    async (portal) => {
      registerQuotaRoutes(portal, { config: parts.config, repository: parts.repository, usage: parts.usage });
      portal.get('/apis/openapi.json', async () => catalogDocument);
      portal.get('/openapi.json', async () => app.swagger());
    },
    { prefix: portalPrefix },
  );
  return app;
}
