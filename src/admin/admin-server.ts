import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import { isDeepStrictEqual } from 'node:util';
import type { Socket } from 'node:net';
import swagger from '@fastify/swagger';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import {
  ApplicationNotFound,
  ApplicationStoreUnavailable,
  type ApplicationRepository,
} from '../applications/application-repository.js';
import { ApplicationDirectory } from '../applications/application-directory.js';
import type { AuthDocumentation, Identification } from '../auth/authenticator.js';
import type { LiveConfig } from '../config/live-config.js';
import type { Config } from '../config/schema.js';
import { adminHostCheck, hostRefusal } from './admin-hosts.js';
import { AdminAudit } from './admin-audit.js';
import { FailedLogins, failedLoginLimits } from './failed-logins.js';
import type { ReadinessCheck } from '../observe/readiness.js';
import type { Logger } from '../observe/log.js';
import type { LatencyReport } from '../observe/added-latency.js';
import type { Metrics } from '../observe/metrics.js';
import type { QuotaUsage } from '../quota/quota-usage.js';
import type { RejectionSource } from '../observe/rejection-history.js';
import {
  QuotaConflict,
  QuotaNotFound,
  QuotaPreconditionFailed,
  QuotaStoreUnavailable,
  QuotaWriteFailed,
  type QuotaRepository,
} from '../quota/quota-repository.js';
import {
  AdminError,
  adminErrorStatuses,
  errorsBody,
  type AdminErrorStatus,
  type ErrorsBody,
} from './admin-errors.js';
import { AdminSessions, type AdminSession } from './admin-sessions.js';
import { AdminUsers, type AdminUser } from './admin-users.js';
import { registerApplicationRoutes } from './application-routes.js';
import { registerConsole } from './console-assets.js';
import { registerSessionRoutes } from './session-routes.js';
import type { DataPlaneAddress } from '../gateway/data-plane-address.js';
import { registerTryIt } from './try-it.js';
import { longestApplicationId } from '../quota/model.js';
import { httpServerOptions } from '../gateway/http-server-options.js';
import { readTlsFiles, type TlsFiles } from '../kit/tls-files.js';
import { jsonSyntaxError } from '../kit/json-syntax-error.js';
import { catalogOpenApi } from './catalog-openapi.js';
import { systemClock } from '../kit/clock.js';
import { registerNotificationRoutes } from './notification-routes.js';
import { registerQuotaRoutes } from './quota-routes.js';
import { registerUpstreamRoutes, type UpstreamRouteParts } from './upstream-routes.js';
import { openApiComponents, zodToOpenApi, zodValidatorCompiler } from './zod-route-schemas.js';

declare module 'fastify' {
  interface FastifyRequest {
    adminUser?: AdminUser;
    /** The login session the request came with, when it authenticated with one. */
    adminSession?: AdminSession;
  }
  interface FastifyContextConfig {
    /** True for the few routes anyone may call: health, readiness, metrics, the Quota API document, login. */
    public?: boolean;
    /** The login route: the only one that takes a form body. */
    login?: boolean;
  }
}

/** Something `/readyz` asks before it says the gateway can take traffic. */

export interface AdminServerParts {
  /** The config in force: a reload changes the admin users and the catalog the Quota API checks. */
  live: LiveConfig;
  logger: Logger;
  metrics: Metrics;
  readiness: ReadinessCheck[];
  /** True once shutdown has begun: load balancers should stop sending traffic. */
  isDraining(): boolean;
  /** The scheme in force, as the catalog's OpenAPI document describes it. */
  authDocumentation: () => AuthDocumentation;
  /** What the current scheme's directory says a name of the Quota API stands for (ldap). */
  identify?: (name: string) => Promise<Identification> | undefined;
  repository: QuotaRepository;
  /** The applications made through the portal API. */
  applicationRepository: ApplicationRepository;
  usage: (quotaId: string) => Promise<QuotaUsage | null>;
  rejections: RejectionSource;
  /** The clock the rejection histories are kept by (tests move it). */
  now?: () => number;
  /** The data plane's ports, for the console's test requests; null before it listens. */
  dataPlane: () => DataPlaneAddress | null;
  /** The text of `/metrics`; by default `metrics.registry`'s (a primary of `workers: N` adds its workers'). */
  metricsText?: () => Promise<string>;
  /** The time the gateway adds to exchanges, of every process that serves the data plane. */
  latency: () => Promise<LatencyReport>;
  upstreams: UpstreamRouteParts['upstreams'];
  /** `admin.tls`'s key and certificate: the listener serves HTTPS (a reload sets new ones on `server`). */
  tls?: TlsFiles;
}

const portalPrefix = '/api/portal/v1.3';
/** Axway API Manager's later version of the same API (apim-cli speaks it): served by the same routes. */
const laterPortalPrefix = /^\/api\/portal\/v1\.4(?=[/?]|$)/;
const adminChallenge = 'Basic realm="quotagate admin", charset="UTF-8"';
/** A param reaches its route even when every character of the longest id is percent-encoded. */
const longestParam = 3 * longestApplicationId;

/**
 * Sent with every admin response, errors and the HTTP parser's answers included: nothing of the admin
 * API is to be sniffed, cached, framed, or given a referrer.
 */
const securityHeaders = {
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
} as const;

/** Methods that change nothing: a session needs no CSRF-Token for them. */
const safeMethods = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * 401 with the Basic challenge, except to a page's script (browsers send `Sec-Fetch-Dest: empty` with
 * fetch): a challenge makes the browser put its own password dialog over the console's login form.
 */
const unauthorized = (request: FastifyRequest) =>
  new AdminError(
    401,
    ['admin credentials are missing or wrong'],
    request.headers['sec-fetch-dest'] === 'empty' ? {} : { 'www-authenticate': adminChallenge },
  );

/** Why fastify's JSON parser refused a body: where it stops being JSON, else a prototype key. */
function unparsableBody(text: string): AdminError {
  const mistake = jsonSyntaxError(text);
  return new AdminError(400, [
    mistake
      ? `body: not valid JSON: ${mistake.reason} at line ${mistake.line}, column ${mistake.column} (offset ${mistake.offset})`
      : 'body: must not hold a __proto__ or constructor key',
  ]);
}

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
  if (error instanceof QuotaStoreUnavailable || error instanceof ApplicationStoreUnavailable)
    return { status: 503, messages: [error.message] };
  if (error instanceof ApplicationNotFound) return { status: 404, messages: [error.message] };
  if (error instanceof QuotaWriteFailed) return { status: 500, messages: [error.message] };
  const fastifyError = error as FastifyError;
  const status = fastifyError.statusCode;
  if (status === 413) return { status, messages: ['the body is larger than 64 KiB'] };
  if (status === 415) return { status, messages: ['the body must be application/json'] };
  if (fastifyError.code === 'FST_ERR_BAD_URL') {
    return { status: 400, messages: ['path: not valid percent-encoded UTF-8'] };
  }
  if (fastifyError.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return { status: 400, messages: ['id: must be at most 200 characters'] };
  }
  if (status === 400) return { status, messages: [`body: ${error.message}`] };
  if (status !== undefined && status in adminErrorStatuses && status < 500) {
    return { status: status as AdminErrorStatus, messages: [error.message] };
  }
  return { status: 500, messages: [] };
}

/**
 * The raw answer to a request the HTTP parser refused or that timed out (fastify never sees it), in the
 * documented shape and with the security headers.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const status: AdminErrorStatus =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
  const body = JSON.stringify(errorsBody(status));
  const headers = Object.entries({
    ...securityHeaders,
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    connection: 'close',
  })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  if (socket.writable)
    socket.write(`HTTP/1.1 ${status} ${adminErrorStatuses[status]}\r\n${headers}\r\n${body}`);
  socket.destroy(error);
}

/**
 * The admin listener's part of a reload to `next`: `admin.tls`'s key and certificate are read now, so
 * that one that cannot be read refuses the reload before anything changes; what is returned puts them in
 * force for new connections. A listener whose TLS the new config turns off (`kept` names it) keeps the
 * certificate it serves, until a restart.
 */
export function prepareAdminCertificates(
  admin: FastifyInstance,
  next: Config,
  kept: readonly string[],
  cwd: string,
): () => void {
  const files = next.admin.tls && !kept.includes('admin.tls') ? readTlsFiles(next.admin.tls, cwd) : null;
  return () => {
    if (files && admin.server instanceof https.Server) admin.server.setSecureContext(files);
  };
}

/**
 * The admin listener: health, readiness, metrics, the portal Quota API with its two roles, and the
 * OpenAPI documents. It never shares a port with the data plane, and it has the data plane's timeouts.
 *
 * Every request needs the credentials of an admin user, decided on the route the router matched (never
 * on the spelling of the URL), unmatched ones included (401 before 404); only routes marked `public`
 * are open. Framework errors (a bad percent-encoding, an overlong id) are answered after the same check.
 */
export async function createAdminServer(parts: AdminServerParts): Promise<FastifyInstance> {
  const { live } = parts;
  let users = new AdminUsers(live.config.admin.users);
  const sessions = new AdminSessions();
  const logger = parts.logger.child({ plane: 'admin' });
  const audit = new AdminAudit(logger);
  const failedLogins = new FailedLogins(parts.now ?? Date.now, failedLoginLimits, (event) =>
    audit.login(event),
  );

  /**
   * The user a request speaks for: its HTTP basic credentials, else its login session (whose user must
   * still be in the config, and whose CSRF-Token must come with any request that changes something).
   */
  const userOf = async (request: FastifyRequest): Promise<AdminUser | null> => {
    const req = request.raw;
    if (req.headers.authorization !== undefined) {
      const credentials = AdminUsers.credentialsOf(req);
      if (!credentials) return null;
      const { username, password } = credentials;
      return failedLogins.attempt(req.socket.remoteAddress, username, (reserve) =>
        users.verify(username, password, reserve),
      );
    }
    const session = sessions.of(req);
    if (!session) return null;
    const user = users.current(session.username);
    if (!user) {
      sessions.close(session);
      return null;
    }
    if (!safeMethods.has(req.method ?? '') && !AdminSessions.csrfMatches(req, session)) {
      throw new AdminError(403, ['the CSRF-Token field is missing or is not the one of this session']);
    }
    request.adminSession = session;
    return user;
  };
  let catalogDocument: ReturnType<typeof catalogOpenApi> | null = null;
  let answersHost = adminHostCheck(live.config.admin);
  live.onChange(({ config }) => {
    answersHost = adminHostCheck(config.admin);
    // A user whose password or role changed (or who left) logs in again: a session proves only the old.
    const before = new Map(users.entries().map((user) => [user.username, user]));
    const after = new Map(config.admin.users.map((user) => [user.username, user]));
    for (const [username, user] of before)
      if (!isDeepStrictEqual(user, after.get(username))) sessions.endFor(username);
    users = new AdminUsers(config.admin.users);
    catalogDocument = null;
  });

  const sendError = (reply: FastifyReply, error: FastifyError | Error, request: FastifyRequest) => {
    const { status, messages, headers } = describeError(error);
    if (status === 500) request.log.error({ err: error }, 'admin request failed');
    if (headers) reply.headers(headers);
    return reply.code(status).type('application/json; charset=utf-8').send(errorsBody(status, messages));
  };

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 64 * 1024,
    // `/quotas/{id}/` is `/quotas/{id}`: clients written for Axway send both.
    routerOptions: { maxParamLength: longestParam, ignoreTrailingSlash: true },
    rewriteUrl: (req) => (req.url ?? '/').replace(laterPortalPrefix, portalPrefix),
    serverFactory: (handler) => {
      const listener = (req: IncomingMessage, res: ServerResponse) => {
        for (const [name, value] of Object.entries(securityHeaders)) res.setHeader(name, value);
        // Before routing and credentials: a name another site rebound to this address gets nothing.
        const refusal = hostRefusal(req, answersHost);
        if (refusal) {
          const body = JSON.stringify(errorsBody(refusal.status, [refusal.message]));
          res.writeHead(refusal.status, { 'content-type': 'application/json; charset=utf-8' }).end(body);
          return;
        }
        handler(req, res);
      };
      const options = httpServerOptions(live.config);
      return parts.tls
        ? https.createServer({ ...options, ...parts.tls }, listener)
        : http.createServer(options, listener);
    },
    clientErrorHandler: answerClientError,
    // Errors of the router, before any hook: the credentials are checked here too, first.
    frameworkErrors: (error, request, reply) => {
      userOf(request).then(
        (user) => sendError(reply, user ? error : unauthorized(request), request),
        (failure: Error) => sendError(reply, failure, request),
      );
    },
  });

  // Only JSON bodies (anything else is 415). Many clients send Content-Type: application/json on every
  // request, DELETE included: an empty body is no body, not an error. fastify's parser refuses
  // __proto__ and constructor keys.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = String(body);
    if (text === '') return done(null, undefined);
    parseJson(request, text, (error, value) =>
      error ? done(unparsableBody(text), undefined) : done(null, value),
    );
  });
  // A login form, as Axway's clients post it; no other route takes a form.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (request, body, done) => {
      if (request.routeOptions.config.login !== true) {
        done(Object.assign(new Error('unsupported media type'), { statusCode: 415 }), undefined);
        return;
      }
      done(null, Object.fromEntries(new URLSearchParams(String(body))));
    },
  );
  app.setValidatorCompiler(zodValidatorCompiler);
  // Responses are built from the schemas' own output; their JSON Schemas document them, nothing more.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

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
    transform: zodToOpenApi,
    // Components named by the schemas' own $id (QuotaDTO, Quota, …), not def-0, def-1, …
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  for (const schema of openApiComponents()) app.addSchema(schema);

  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.config.public === true) return;
    const user = await userOf(request);
    if (!user) throw unauthorized(request);
    request.adminUser = user;
  });
  audit.follow(app);

  app.setErrorHandler((error: FastifyError, request, reply) => sendError(reply, error, request));
  app.setNotFoundHandler((_request, reply) => reply.code(404).send(errorsBody(404) satisfies ErrorsBody));

  const open = { config: { public: true } };
  app.get('/healthz', open, async () => ({ status: 'ok' }));
  registerConsole(app);

  app.get('/readyz', open, async (_request, reply) => {
    const results = await Promise.all(
      parts.readiness.map(async (check) => [check.name, await check.ready()] as const),
    );
    const checks = Object.fromEntries(results.map(([name, ok]) => [name, ok ? 'ok' : 'unreachable']));
    const ready = !parts.isDraining() && results.every(([, ok]) => ok);
    const status = ready ? 'ready' : parts.isDraining() ? 'draining' : 'not ready';
    return reply.code(ready ? 200 : 503).send({ status, checks });
  });

  app.get('/metrics', open, async (_request, reply) => {
    const body = await (parts.metricsText?.() ?? parts.metrics.registry.metrics());
    return reply.type(parts.metrics.registry.contentType).send(body);
  });

  app.get('/latency', open, () => parts.latency());

  await app.register(
    async (portal) => {
      registerSessionRoutes(portal, { users: () => users, sessions, failedLogins });
      const made = new ApplicationDirectory();
      made.follow(parts.applicationRepository);
      registerQuotaRoutes(portal, {
        live,
        repository: parts.repository,
        usage: parts.usage,
        rejections: parts.rejections,
        ...(parts.now ? { now: parts.now } : {}),
        ...(parts.identify ? { identify: parts.identify } : {}),
        made,
      });
      registerTryIt(portal, { live, authDocumentation: parts.authDocumentation, dataPlane: parts.dataPlane });
      registerApplicationRoutes(portal, {
        live,
        repository: parts.applicationRepository,
        quotas: parts.repository,
        usage: parts.usage,
      });
      registerUpstreamRoutes(portal, { upstreams: parts.upstreams });
      registerNotificationRoutes(portal, { live, logger, metrics: parts.metrics, clock: systemClock });
      portal.get(
        '/apis/openapi.json',
        async () => (catalogDocument ??= catalogOpenApi(live.config, parts.authDocumentation())),
      );
      portal.get('/openapi.json', open, async () => app.swagger());
    },
    { prefix: portalPrefix },
  );
  return app;
}
