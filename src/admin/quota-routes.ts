import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import { buildQuota, catalogIds, type QuotaDto } from '../quota/build-quota.js';
import {
  applicationDefaultQuotaId,
  systemQuotaId,
  wellKnownQuotaIds,
  type Quota,
  type StoredQuota,
} from '../quota/model.js';
import type { QuotaRepository } from '../quota/quota-repository.js';
import type { QuotaUsage } from '../quota/quota-usage.js';
import { AdminError, adminErrorStatuses } from './admin-errors.js';
import { applicationIdOf } from './application-ids.js';
import { requiredEtag, setEtag } from './entity-tags.js';

export interface QuotaRoutesParts {
  config: Readonly<Config>;
  repository: QuotaRepository;
  usage: (quotaId: string) => Promise<QuotaUsage | null>;
}

const errorResponses = Object.fromEntries(
  Object.entries(adminErrorStatuses).map(([status, description]) => [
    status,
    { description, $ref: 'Errors#' },
  ]),
);
const quotaResponse = (status: number, description: string) => ({
  [status]: { description, $ref: 'Quota#' },
  ...errorResponses,
});
const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', maxLength: 200 } },
} as const;

type IdRequest = FastifyRequest<{ Params: { id: string } }>;
type BodyRequest = FastifyRequest<{ Params: { id: string }; Body: QuotaDto }>;

function requireAdmin(request: FastifyRequest): void {
  if (request.adminUser?.role !== 'admin')
    throw new AdminError(403, ['only an API Administrator may do this']);
}

/** The seed's Quota REST API and the applications' own quotas, under /api/portal/v1.3. */
export function registerQuotaRoutes(app: FastifyInstance, parts: QuotaRoutesParts): void {
  const { repository, config } = parts;
  const catalog = catalogIds(config.apis);

  const build = (dto: QuotaDto, id: string, system: boolean): Quota => {
    const result = buildQuota(dto, { id, system }, catalog);
    if ('problems' in result) throw new AdminError(400, result.problems);
    return result.quota;
  };

  const found = (id: string): StoredQuota => {
    const record = repository.get(id.toLowerCase());
    if (!record) throw new AdminError(404, [`no quota with id '${id}'`]);
    return record;
  };

  const answer = (reply: FastifyReply, record: StoredQuota, status = 200) => {
    setEtag(reply, record);
    return reply.code(status).send(record.quota);
  };

  const application = (id: string): string => {
    const applicationId = applicationIdOf(config, id);
    if (!applicationId) throw new AdminError(404, [`no application with id '${id}'`]);
    return applicationId;
  };

  app.post(
    '/quotas',
    {
      schema: {
        summary: 'Create a quota (API Administrators)',
        tags: ['quotas'],
        body: { $ref: 'QuotaDTO#' },
        response: quotaResponse(201, 'The created quota'),
      },
    },
    async (request: BodyRequest, reply) => {
      requireAdmin(request);
      const created = await repository.create({ quota: build(request.body, randomUUID(), false) });
      reply.header('location', `/api/portal/v1.3/quotas/${created.quota.id}`);
      return answer(reply, created, 201);
    },
  );

  app.get(
    '/quotas',
    {
      schema: {
        summary: 'List the quotas (members do not see the System quota)',
        tags: ['quotas'],
        response: { 200: { type: 'array', items: { $ref: 'Quota#' } }, ...errorResponses },
      },
    },
    async (request) => {
      const visible = repository
        .all()
        .filter((record) => request.adminUser?.role === 'admin' || record.quota.id !== systemQuotaId)
        .map((record) => record.quota);
      return visible.sort((a, b) => Number(b.system) - Number(a.system) || a.id.localeCompare(b.id));
    },
  );

  app.get(
    '/quotas/:id',
    {
      schema: {
        summary: 'Read a quota (only API Administrators may read the System quota)',
        tags: ['quotas'],
        params: idParams,
        response: quotaResponse(200, 'The quota'),
      },
    },
    async (request: IdRequest, reply) => {
      const record = found(request.params.id);
      if (record.quota.id === systemQuotaId) requireAdmin(request);
      return answer(reply, record);
    },
  );

  app.put(
    '/quotas/:id',
    {
      schema: {
        summary: 'Update a quota (API Administrators); the body is what counts',
        tags: ['quotas'],
        params: idParams,
        querystring: {
          type: 'object',
          properties: {
            quota: { type: 'string', description: "The seed's `quota` parameter: accepted, not used" },
          },
        },
        body: { $ref: 'QuotaDTO#' },
        response: quotaResponse(200, 'The updated quota'),
      },
    },
    async (request: BodyRequest, reply) => {
      requireAdmin(request);
      const current = found(request.params.id);
      const quota = build(request.body, current.quota.id, current.quota.system);
      if ((current.quota.system || current.application) && quota.type !== current.quota.type) {
        throw new AdminError(400, [`type: must stay ${current.quota.type} for this quota`]);
      }
      return answer(reply, await repository.replace({ quota }, requiredEtag(request, current)));
    },
  );

  app.delete(
    '/quotas/:id',
    {
      schema: {
        summary: 'Delete a quota (API Administrators); the well-known quotas cannot be deleted',
        tags: ['quotas'],
        params: idParams,
        response: { 204: { description: 'Deleted', type: 'null' }, ...errorResponses },
      },
    },
    async (request: IdRequest, reply) => {
      requireAdmin(request);
      const current = found(request.params.id);
      if (wellKnownQuotaIds.has(current.quota.id)) {
        throw new AdminError(403, ['the System and Application Default quotas cannot be deleted']);
      }
      await repository.remove(current.quota.id, requiredEtag(request, current));
      return reply.code(204).send();
    },
  );

  app.get(
    '/quotas/:id/usage',
    {
      schema: {
        summary: 'What each restriction of a quota has counted in its current window (API Administrators)',
        tags: ['quotas'],
        params: idParams,
        response: {
          200: {
            description: 'Usage per restriction; per application for application quotas',
            type: 'object',
            properties: {
              quota: { type: 'string' },
              restrictions: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    index: { type: 'integer' },
                    type: { type: 'string' },
                    unit: { type: 'string', enum: ['messages', 'bytes'] },
                    limit: { type: 'number' },
                    windowSeconds: { type: 'number' },
                    used: { type: 'number' },
                    applications: {
                      type: 'array',
                      items: {
                        type: 'object',
                        properties: { application: { type: 'string' }, used: { type: 'number' } },
                      },
                    },
                  },
                },
              },
            },
          },
          ...errorResponses,
        },
      },
    },
    async (request: IdRequest) => {
      requireAdmin(request);
      const usage = await parts.usage(found(request.params.id).quota.id);
      if (!usage) throw new AdminError(404, [`no quota with id '${request.params.id}'`]);
      return usage;
    },
  );

  /** An application's own quota: always of type APPLICATION. */
  const buildOwn = (dto: QuotaDto, id: string): Quota => {
    const quota = build(dto, id, false);
    if (quota.type !== 'APPLICATION')
      throw new AdminError(400, ["type: must be APPLICATION for an application's quota"]);
    return quota;
  };

  const ownQuota = (id: string): StoredQuota => {
    const applicationId = application(id);
    const own = repository.ofApplication(applicationId);
    if (!own)
      throw new AdminError(404, [`application '${applicationId}' has no quota of its own; POST creates one`]);
    return own;
  };

  const applicationSchema = (summary: string, success: Record<string, unknown>, body = false) => ({
    schema: {
      summary,
      tags: ['applications'],
      params: idParams,
      ...(body ? { body: { $ref: 'QuotaDTO#' } } : {}),
      response: { ...success, ...errorResponses },
    },
  });

  app.get(
    '/applications/:id/quota',
    applicationSchema("An application's quota: its own, else the Application Default", {
      200: { description: 'The quota', $ref: 'Quota#' },
    }),
    async (request: IdRequest, reply) => {
      requireAdmin(request);
      const own = repository.ofApplication(application(request.params.id));
      return answer(reply, own ?? found(applicationDefaultQuotaId));
    },
  );

  app.post(
    '/applications/:id/quota',
    applicationSchema(
      'Give an application a quota of its own',
      { 201: { description: 'Created', $ref: 'Quota#' } },
      true,
    ),
    async (request: BodyRequest, reply) => {
      requireAdmin(request);
      const applicationId = application(request.params.id);
      const quota = buildOwn(request.body, randomUUID());
      if (repository.ofApplication(applicationId)) {
        throw new AdminError(409, [`application '${applicationId}' already has a quota; PUT updates it`]);
      }
      return answer(reply, await repository.create({ quota, application: applicationId }), 201);
    },
  );

  app.put(
    '/applications/:id/quota',
    applicationSchema(
      "Update an application's own quota",
      { 200: { description: 'Updated', $ref: 'Quota#' } },
      true,
    ),
    async (request: BodyRequest, reply) => {
      requireAdmin(request);
      const current = ownQuota(request.params.id);
      const quota = buildOwn(request.body, current.quota.id);
      return answer(reply, await repository.replace({ quota }, requiredEtag(request, current)));
    },
  );

  app.delete(
    '/applications/:id/quota',
    applicationSchema('Return an application to the Application Default quota', {
      204: { description: 'Deleted', type: 'null' },
    }),
    async (request: IdRequest, reply) => {
      requireAdmin(request);
      const current = ownQuota(request.params.id);
      await repository.remove(current.quota.id, requiredEtag(request, current));
      return reply.code(204).send();
    },
  );
}
