import { createHash, randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ApplicationRepository } from '../applications/application-repository.js';
import {
  apiKeyBodySchema,
  applicationBodySchema,
  type ApiKeyBody,
  type ApplicationBody,
  type StoredApplication,
  type StoredKey,
} from '../applications/application-schema.js';
import { projectApplicationId } from '../applications/application-ids.js';
import { namesIdentities, namesKeys } from '../applications/caller-schemes.js';
import type { LiveConfig } from '../config/live-config.js';
import type { Config } from '../config/schema.js';
import { generateApiKey } from '../init/generate-api-key.js';
import type { StoredQuota } from '../quota/model.js';
import type { QuotaRepository } from '../quota/quota-repository.js';
import type { QuotaUsage } from '../quota/quota-usage.js';
import { AdminError, errorResponses } from './admin-errors.js';
import { noteTarget } from './admin-audit.js';
import { documentedAs } from './zod-route-schemas.js';

export interface ApplicationRoutesParts {
  /** The config in force: its applications (a reload changes them), read-only here. */
  live: LiveConfig;
  /** The applications made through this API. */
  repository: ApplicationRepository;
  /** The quota definitions: an application deleted here takes its own quota with it. */
  quotas: QuotaRepository;
  /** What a quota counts now: the callers an application quota counts are applications the gateway knows. */
  usage: (quotaId: string) => Promise<QuotaUsage | null>;
}

/** An application as answered, in the shape of Axway API Manager's ClientApplication (no key in it). */
interface ApplicationAnswer {
  id: string;
  name: string;
  description: string;
  enabled: boolean;
  state: 'approved';
  /** True for the applications of conf/: read-only here. */
  declared: boolean;
  /**
   * A caller of ldap, jwt or plugin, which nobody declares: known by its quota (its own, or a plan it is
   * on), or by its usage (counted now by the Application Default or a plan). Read-only here.
   */
  known?: 'quota' | 'usage';
  createdOn?: number;
}

const oneOrMore = z.union([z.string(), z.array(z.string())]).optional();
const filterQuery = z.object({
  field: oneOrMore.meta({ description: 'Filter field (name, id, state, enabled); repeat for more filters' }),
  op: oneOrMore.meta({ description: 'eq, or like (contains, any case) for name' }),
  value: oneOrMore.meta({ description: 'The value the field is compared with' }),
});
const idParams = z.object({ id: z.string().max(200, { error: 'must be at most 200 characters' }) });
const keyParams = idParams.extend({
  keyId: z.string().max(200, { error: 'must be at most 200 characters' }),
});
const keyUpdate = z.strictObject(
  { enabled: z.boolean({ error: 'must be true or false' }) },
  { error: 'must be an object' },
);
const applicationBody = documentedAs(applicationBodySchema, 'ApplicationDTO');

const answered = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    description: { type: 'string' },
    enabled: { type: 'boolean' },
    state: { type: 'string', enum: ['approved'] },
    declared: { type: 'boolean', description: 'An application of conf/: read-only through this API' },
    known: {
      type: 'string',
      enum: ['quota', 'usage'],
      description:
        'A caller of ldap, jwt or plugin, known by its quota or plan, or by its usage in the current window: read-only through this API',
    },
    createdOn: { type: 'integer', description: 'Milliseconds since the epoch' },
  },
} as const;
const keyAnswered = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    applicationId: { type: 'string' },
    environment: { type: 'string', enum: ['development', 'production'] },
    enabled: { type: 'boolean' },
    createdOn: { type: 'integer' },
    key: { type: 'string', description: 'The key itself: in the answer to its creation only' },
  },
} as const;
const location = { Location: { type: 'string', description: 'The path of what was created' } };

const asList = (value: string | string[] | undefined) =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];
const approved = { state: 'approved' } as const;

/** The applications whose keys the config holds: the project's own and those of `applications`. */
function declaredApplications(config: Readonly<Config>): ApplicationAnswer[] {
  if (!namesKeys(config)) return [];
  return [
    {
      id: projectApplicationId,
      name: projectApplicationId,
      description: "The project's own key (apikey_development, apikey_production)",
      enabled: true,
      ...approved,
      declared: true,
    },
    ...config.applications.map((app) => ({
      id: app.id,
      name: app.name,
      description: app.description ?? '',
      enabled: true,
      ...approved,
      declared: true,
    })),
  ];
}

const knownAnswer = (id: string, known: 'quota' | 'usage'): ApplicationAnswer => ({
  id,
  name: id,
  description:
    known === 'quota'
      ? 'Has a quota of its own, or is on a plan'
      : 'Counted now by the Application Default or a plan',
  enabled: true,
  ...approved,
  declared: false,
  known,
});

/**
 * The callers of an identity scheme that the gateway knows, in the order of their ids: those with a
 * record in the quota store (an own quota, a plan membership), and those an application quota every
 * application shares (the Application Default, a plan) counts in its current window.
 */
async function knownCallers(
  quotas: readonly StoredQuota[],
  usage: ApplicationRoutesParts['usage'],
): Promise<ApplicationAnswer[]> {
  const withQuota = new Set(quotas.flatMap((record) => (record.application ? [record.application] : [])));
  const shared = quotas.filter((record) => record.quota.type === 'APPLICATION' && !record.application);
  // A usage the store cannot read now (Redis down) hides only the callers it would have shown.
  const usages = await Promise.all(shared.map((record) => usage(record.quota.id).catch(() => null)));
  const counted = new Set(
    usages.flatMap((answer) =>
      (answer?.restrictions ?? []).flatMap((restriction) =>
        (restriction.applications ?? []).map((entry) => entry.application),
      ),
    ),
  );
  const ids = [...new Set([...withQuota, ...counted])].sort((a, b) => a.localeCompare(b));
  return ids.map((id) => knownAnswer(id, withQuota.has(id) ? 'quota' : 'usage'));
}

const answerOf = ({ id, name, description, enabled, createdOn }: StoredApplication): ApplicationAnswer => ({
  id,
  name,
  description,
  enabled,
  ...approved,
  declared: false,
  createdOn,
});

const keyAnswerOf = (applicationId: string, { id, environment, enabled, createdOn }: StoredKey) => ({
  id,
  applicationId,
  environment,
  enabled,
  createdOn,
});

type Filter = (application: ApplicationAnswer) => boolean;

/** Axway's filters (`field=name&op=like&value=mob`), each a test every listed application must pass. */
function filtersOf(query: z.output<typeof filterQuery>): Filter[] {
  const [fields, ops, values] = [asList(query.field), asList(query.op), asList(query.value)];
  if (fields.length !== values.length || (ops.length > 0 && ops.length !== fields.length)) {
    throw new AdminError(400, ['query: field, op and value come in threes (op may be left out: eq)']);
  }
  const problems: string[] = [];
  const filters = fields.map((field, i): Filter => {
    const op = ops[i] ?? 'eq';
    const value = values[i]!;
    if (field === 'name' && op === 'like') {
      const needle = value.replace(/^\*|\*$/g, '').toLowerCase();
      return (app) => app.name.toLowerCase().includes(needle);
    }
    if (op !== 'eq')
      problems.push(`op: '${op}' is not supported for ${field} (eq${field === 'name' ? ', like' : ''})`);
    switch (field) {
      case 'name':
        return (app) => app.name === value;
      case 'id':
        return (app) => app.id.toLowerCase() === value.toLowerCase();
      case 'state':
        return (app) => app.state === value;
      case 'enabled':
        return (app) => String(app.enabled) === value;
      default:
        problems.push(
          `field: '${field}' is not a field applications are filtered by here (name, id, state, enabled)`,
        );
        return () => false;
    }
  });
  if (problems.length > 0) throw new AdminError(400, problems);
  return filters;
}

function requireAdmin(request: FastifyRequest): void {
  if (request.adminUser?.role !== 'admin')
    throw new AdminError(403, ['only an API Administrator may do this']);
}

type IdRequest = FastifyRequest<{ Params: { id: string } }>;
type KeyRequest = FastifyRequest<{ Params: { id: string; keyId: string } }>;

/**
 * The applications, as Axway API Manager serves them: those of conf/ (read-only here) and those made
 * through this API, with their API keys. A key is generated by the gateway, answered once (to its
 * creation) and kept as a SHA-256 digest only; every gateway of the fleet takes a change within a
 * second. With the ldap, jwt and plugin schemes the callers are the directory's, the identity
 * provider's or the plugin's, which nobody can list in advance: conf/ adds none, keys of applications
 * made here open no request, and the list holds the callers the gateway knows (by their quota, or by
 * what the Application Default and the plans count now).
 */
export function registerApplicationRoutes(app: FastifyInstance, parts: ApplicationRoutesParts): void {
  const { live, repository } = parts;
  /** The callers of the scheme in force that the gateway knows, besides the applications made here. */
  const known = async () => {
    if (!namesIdentities(live.config)) return [];
    const callers = await knownCallers(parts.quotas.all(), parts.usage);
    return callers.filter((caller) => !repository.get(caller.id.toLowerCase()));
  };
  const all = async () => [
    ...declaredApplications(live.config),
    ...repository.all().map(answerOf),
    ...(await known()),
  ];

  /** An application of this API, to change: one of conf/, or a caller of the scheme, is 403; an unknown id 404. */
  const madeHere = async (id: string): Promise<StoredApplication> => {
    const made = repository.get(id.toLowerCase());
    if (made) return made;
    if (declaredApplications(live.config).some((declared) => declared.id.toLowerCase() === id.toLowerCase()))
      throw new AdminError(403, [`application '${id}' is declared in conf/: change it there and reload`]);
    if ((await known()).some((caller) => caller.id === id))
      throw new AdminError(403, [
        `application '${id}' is a caller of the ${live.config.APIKeyAuthType} scheme, whose identities are not made here: set its quota at /applications/${id}/quota`,
      ]);
    throw new AdminError(404, [`no application with id '${id}'`]);
  };

  const created = (reply: FastifyReply, path: string, body: unknown) =>
    reply.code(201).header('location', `/api/portal/v1.3${path}`).send(body);

  app.get(
    '/applications',
    {
      schema: {
        summary: 'List the applications (Axway filters: field, op, value)',
        operationId: 'listApplications',
        tags: ['applications'],
        querystring: filterQuery,
        response: {
          200: { description: 'The applications', type: 'array', items: answered },
          ...errorResponses,
        },
      },
    },
    async (request: FastifyRequest<{ Querystring: z.output<typeof filterQuery> }>) => {
      const filters = filtersOf(request.query);
      return (await all()).filter((application) => filters.every((passes) => passes(application)));
    },
  );

  app.post(
    '/applications',
    {
      schema: {
        summary: 'Create an application (API Administrators)',
        operationId: 'createApplication',
        tags: ['applications'],
        body: applicationBody,
        response: { 201: { description: 'Created', headers: location, ...answered }, ...errorResponses },
      },
    },
    async (request: FastifyRequest<{ Body: ApplicationBody }>, reply) => {
      requireAdmin(request);
      const { name, description = '', enabled = true } = request.body;
      const application = await repository.create({
        id: randomUUID(),
        name,
        description,
        enabled,
        createdOn: Date.now(),
        keys: [],
      });
      noteTarget(request, { application: application.id });
      return created(reply, `/applications/${application.id}`, answerOf(application));
    },
  );

  app.get(
    '/applications/:id',
    {
      schema: {
        summary: 'Read an application',
        operationId: 'getApplication',
        tags: ['applications'],
        params: idParams,
        response: { 200: { description: 'The application', ...answered }, ...errorResponses },
      },
    },
    async (request: IdRequest) => {
      const { id } = request.params;
      const found = (await all()).find((application) => application.id.toLowerCase() === id.toLowerCase());
      if (!found) throw new AdminError(404, [`no application with id '${id}'`]);
      return found;
    },
  );

  app.put(
    '/applications/:id',
    {
      schema: {
        summary: 'Update an application made through this API (API Administrators)',
        operationId: 'updateApplication',
        tags: ['applications'],
        params: idParams,
        body: applicationBody,
        response: { 200: { description: 'Updated', ...answered }, ...errorResponses },
      },
    },
    async (request: FastifyRequest<{ Params: { id: string }; Body: ApplicationBody }>) => {
      requireAdmin(request);
      const { id } = await madeHere(request.params.id);
      const { name, description, enabled } = request.body;
      const updated = await repository.update(id, (current) => ({
        ...current,
        name,
        ...(description === undefined ? {} : { description }),
        ...(enabled === undefined ? {} : { enabled }),
      }));
      return answerOf(updated);
    },
  );

  app.delete(
    '/applications/:id',
    {
      schema: {
        summary:
          'Delete an application made through this API, its keys and its own quota (API Administrators)',
        operationId: 'deleteApplication',
        tags: ['applications'],
        params: idParams,
        response: { 204: { description: 'Deleted', type: 'null' }, ...errorResponses },
      },
    },
    async (request: IdRequest, reply) => {
      requireAdmin(request);
      const { id } = await madeHere(request.params.id);
      await repository.remove(id);
      const own = parts.quotas.ofApplication(id);
      if (own) {
        noteTarget(request, own.plan === undefined ? { quota: own.quota.id } : { plan: own.plan });
        await parts.quotas.remove(own.quota.id);
      }
      return reply.code(204).send();
    },
  );

  app.get(
    '/applications/:id/apikeys',
    {
      schema: {
        summary: "An application's API keys, without the keys themselves",
        operationId: 'listApiKeys',
        tags: ['applications'],
        params: idParams,
        response: { 200: { description: 'The keys', type: 'array', items: keyAnswered }, ...errorResponses },
      },
    },
    async (request: IdRequest) => {
      const { id } = request.params;
      const made = repository.get(id.toLowerCase());
      if (made) return made.keys.map((key) => keyAnswerOf(made.id, key));
      if ((await all()).some((application) => application.id.toLowerCase() === id.toLowerCase())) return [];
      throw new AdminError(404, [`no application with id '${id}'`]);
    },
  );

  app.post(
    '/applications/:id/apikeys',
    {
      schema: {
        summary:
          'Generate an API key for an application; the key is in this answer only (API Administrators)',
        operationId: 'createApiKey',
        tags: ['applications'],
        params: idParams,
        body: apiKeyBodySchema,
        response: {
          201: { description: 'Created; `key` is shown this once', headers: location, ...keyAnswered },
          ...errorResponses,
        },
      },
    },
    async (request: FastifyRequest<{ Params: { id: string }; Body: ApiKeyBody | undefined }>, reply) => {
      requireAdmin(request);
      const { id } = await madeHere(request.params.id);
      const secret = generateApiKey();
      const key: StoredKey = {
        id: randomUUID(),
        digest: createHash('sha256').update(secret, 'utf8').digest('hex'),
        environment: request.body?.environment ?? parts.live.current.environment,
        enabled: request.body?.enabled ?? true,
        createdOn: Date.now(),
      };
      await repository.update(id, (current) => {
        if (current.keys.length >= 100) throw new AdminError(409, ['an application holds at most 100 keys']);
        return { ...current, keys: [...current.keys, key] };
      });
      noteTarget(request, { key: key.id, environment: key.environment });
      return created(reply, `/applications/${id}/apikeys/${key.id}`, {
        ...keyAnswerOf(id, key),
        key: secret,
      });
    },
  );

  /** The key of an application of this API, or 404. */
  const keyOf = async (request: KeyRequest) => {
    const application = await madeHere(request.params.id);
    const key = application.keys.find((candidate) => candidate.id === request.params.keyId.toLowerCase());
    if (!key)
      throw new AdminError(404, [`application '${application.id}' has no key '${request.params.keyId}'`]);
    return { application, key };
  };

  app.put(
    '/applications/:id/apikeys/:keyId',
    {
      schema: {
        summary: 'Enable or disable an API key (API Administrators)',
        operationId: 'updateApiKey',
        tags: ['applications'],
        params: keyParams,
        body: keyUpdate,
        response: { 200: { description: 'Updated', ...keyAnswered }, ...errorResponses },
      },
    },
    async (
      request: FastifyRequest<{ Params: { id: string; keyId: string }; Body: { enabled: boolean } }>,
    ) => {
      requireAdmin(request);
      const { application, key } = await keyOf(request);
      const updated = { ...key, enabled: request.body.enabled };
      noteTarget(request, { enabled: updated.enabled });
      await repository.update(application.id, (current) => ({
        ...current,
        keys: current.keys.map((candidate) => (candidate.id === key.id ? updated : candidate)),
      }));
      return keyAnswerOf(application.id, updated);
    },
  );

  app.delete(
    '/applications/:id/apikeys/:keyId',
    {
      schema: {
        summary: 'Revoke an API key: refused on every gateway within a second (API Administrators)',
        operationId: 'deleteApiKey',
        tags: ['applications'],
        params: keyParams,
        response: { 204: { description: 'Revoked', type: 'null' }, ...errorResponses },
      },
    },
    async (request: KeyRequest, reply) => {
      requireAdmin(request);
      const { application, key } = await keyOf(request);
      await repository.update(application.id, (current) => ({
        ...current,
        keys: current.keys.filter((candidate) => candidate.id !== key.id),
      }));
      return reply.code(204).send();
    },
  );
}
