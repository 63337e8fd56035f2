import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { restrictionUnits, systemQuotaId, wellKnownQuotaIds, type QuotaDto } from '../quota/model.js';
import { membersByPlan } from '../quota/plans.js';
import { quotaDtoSchema } from '../quota/quota-schema.js';
import { rejectionBucketSeconds, rejectionSeries } from '../observe/rejection-history.js';
import { AdminError, errorResponses } from './admin-errors.js';
import { noteTarget } from './admin-audit.js';
import { registerApplicationQuotaRoutes } from './application-quota-routes.js';
import {
  createdQuotaLocation,
  ifMatchHeaders,
  quotaLocation,
  quotaResponse,
  requireAdmin,
  QuotaRouteKit,
  type IdRequest,
  type QuotaRoutesParts,
} from './quota-route-kit.js';
import { documentedAs } from './zod-route-schemas.js';

export type { QuotaRoutesParts } from './quota-route-kit.js';

const idParams = z.object({
  id: z
    .string()
    .max(200, { error: 'must be at most 200 characters' })
    .meta({ description: 'The id (at most 200 characters)' }),
});
const putQuery = z.object({
  quota: z
    .string({ error: 'must be a string' })
    .optional()
    .meta({ description: "The seed's `quota` parameter: accepted, not used" }),
});

type BodyRequest = FastifyRequest<{ Params: { id: string }; Body: QuotaDto }>;

/** The seed's Quota REST API and the applications' own quotas and plans, under /api/portal/v1.3. */
export function registerQuotaRoutes(app: FastifyInstance, parts: QuotaRoutesParts): void {
  const kit = new QuotaRouteKit(parts);
  const { repository } = kit;
  // Restrictions must name APIs and methods of the catalog in force: checked in the same pass as the rest.
  const quotaBody = documentedAs(
    quotaDtoSchema(() => kit.catalog),
    'QuotaDTO',
  );

  app.post(
    '/quotas',
    {
      schema: {
        summary: 'Create a quota (API Administrators)',
        operationId: 'createQuota',
        tags: ['quotas'],
        body: quotaBody,
        response: quotaResponse(201, 'The created quota', createdQuotaLocation),
      },
    },
    async (request: BodyRequest, reply) => {
      requireAdmin(request);
      const created = await repository.create({ quota: kit.build(request.body, randomUUID(), false) });
      noteTarget(request, { quota: created.quota.id });
      reply.header('location', quotaLocation(created.quota.id));
      return kit.answer(reply, created, 201);
    },
  );

  app.get(
    '/quotas',
    {
      schema: {
        summary: 'List the quotas (members do not see the System quota)',
        operationId: 'listQuotas',
        tags: ['quotas'],
        response: { 200: { type: 'array', items: { $ref: 'Quota#' } }, ...errorResponses },
      },
    },
    async (request) => {
      const members = membersByPlan(repository.all());
      return repository
        .all()
        .filter((record) => request.adminUser?.role === 'admin' || record.quota.id !== systemQuotaId)
        .filter((record) => record.plan === undefined)
        .sort(
          (a, b) => Number(b.quota.system) - Number(a.quota.system) || a.quota.id.localeCompare(b.quota.id),
        )
        .map((record) => kit.shown(record, members));
    },
  );

  app.get(
    '/quotas/:id',
    {
      schema: {
        summary: 'Read a quota (only API Administrators may read the System quota)',
        operationId: 'getQuota',
        tags: ['quotas'],
        params: idParams,
        response: quotaResponse(200, 'The quota'),
      },
    },
    async (request: IdRequest, reply) => {
      if (request.params.id.toLowerCase() === systemQuotaId) requireAdmin(request);
      return kit.answer(reply, kit.found(request.params.id));
    },
  );

  // The schema fills in an absent description with '': whether the client sent one is read before it.
  const sentDescription = new WeakSet<FastifyRequest>();
  app.put(
    '/quotas/:id',
    {
      preValidation: async (request: FastifyRequest) => {
        const body = request.body;
        if (typeof body === 'object' && body !== null && 'description' in body) sentDescription.add(request);
      },
      schema: {
        summary:
          'Update a quota (API Administrators); the body is what counts (a well-known quota keeps its description when none is sent)',
        operationId: 'updateQuota',
        tags: ['quotas'],
        params: idParams,
        headers: ifMatchHeaders,
        querystring: putQuery,
        body: quotaBody,
        response: quotaResponse(200, 'The updated quota'),
      },
    },
    async (request: BodyRequest, reply) => {
      requireAdmin(request);
      const current = kit.writable(request.params.id);
      noteTarget(request, { quota: current.id });
      kit.requireUndeclared(current.id);
      const dto = request.body;
      const quota = kit.build(
        !sentDescription.has(request) && current.keepsDescription !== undefined
          ? { ...dto, description: current.keepsDescription }
          : dto,
        current.id,
        current.system,
      );
      if (current.keepsType && quota.type !== current.keepsType) {
        throw new AdminError(400, [`type: must stay ${current.keepsType} for this quota`]);
      }
      return kit.answer(reply, await repository.replace({ quota }, kit.storedIfMatch(request, current)));
    },
  );

  app.delete(
    '/quotas/:id',
    {
      schema: {
        summary: 'Delete a quota (API Administrators); the well-known quotas cannot be deleted',
        operationId: 'deleteQuota',
        tags: ['quotas'],
        params: idParams,
        headers: ifMatchHeaders,
        response: { 204: { description: 'Deleted', type: 'null' }, ...errorResponses },
      },
    },
    async (request: IdRequest, reply) => {
      requireAdmin(request);
      const current = kit.writable(request.params.id);
      noteTarget(request, { quota: current.id });
      kit.requireUndeclared(current.id);
      if (wellKnownQuotaIds.has(current.id)) {
        throw new AdminError(403, ['the System and Application Default quotas cannot be deleted']);
      }
      await repository.remove(current.id, kit.storedIfMatch(request, current));
      return reply.code(204).send();
    },
  );

  app.get(
    '/quotas/:id/usage',
    {
      schema: {
        summary:
          "What each restriction of a quota has counted in its current window, and its recent rejections (only API Administrators may read the System quota's)",
        operationId: 'getQuotaUsage',
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
                    unit: { type: 'string', enum: [...restrictionUnits] },
                    mode: {
                      type: 'string',
                      enum: ['shadow'],
                      description:
                        'Only for a shadow restriction, whose rejections are the requests it would have refused',
                    },
                    limit: { type: 'number' },
                    windowSeconds: { type: 'number' },
                    used: { type: 'number', description: 'API quotas: units counted for all traffic' },
                    resetSeconds: {
                      type: 'number',
                      description: 'API quotas: seconds until the oldest counted units leave the window',
                    },
                    applications: {
                      type: 'array',
                      description: 'Application quotas: the applications that have units counted',
                      items: {
                        type: 'object',
                        properties: {
                          application: { type: 'string' },
                          name: { type: 'string', description: "The config's name of the application" },
                          used: { type: 'number' },
                          resetSeconds: { type: 'number' },
                        },
                      },
                    },
                    rejections: {
                      type: 'object',
                      description:
                        'Requests this restriction rejected (a shadow one: would have rejected) in each of the last buckets, oldest first',
                      properties: {
                        bucketSeconds: { type: 'integer' },
                        counts: { type: 'array', items: { type: 'integer' } },
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
      if (request.params.id.toLowerCase() === systemQuotaId) requireAdmin(request);
      const { quota } = kit.found(request.params.id);
      const [usage, histories] = await Promise.all([
        parts.usage(quota.id),
        parts.rejections(quota.id, quota.restrictions.length),
      ]);
      if (!usage) throw new AdminError(404, [`no quota with id '${request.params.id}'`]);
      const now = (parts.now ?? Date.now)();
      return {
        ...usage,
        restrictions: usage.restrictions.map((restriction) => ({
          ...restriction,
          ...(restriction.applications
            ? {
                applications: restriction.applications.map((entry) => ({
                  ...entry,
                  name: kit.names.nameOf(entry.application),
                })),
              }
            : {}),
          rejections: {
            bucketSeconds: rejectionBucketSeconds,
            counts: rejectionSeries(histories, restriction.index, now),
          },
        })),
      };
    },
  );

  app.get(
    '/refused-quotas',
    {
      schema: {
        summary:
          'Stored quota definitions that this gateway refuses (written by another version, or by hand): not enforced; PUT or DELETE their id (API Administrators)',
        operationId: 'listRefusedQuotas',
        tags: ['quotas'],
        response: {
          200: {
            description: 'Every refused definition, with each problem and its text as stored',
            type: 'array',
            items: {
              type: 'object',
              required: ['id', 'problems', 'stored'],
              properties: {
                id: { type: 'string' },
                application: { type: 'string', description: 'The application it belongs to, if any' },
                problems: { type: 'array', items: { type: 'string' } },
                stored: { type: 'string', description: 'The definition as stored' },
              },
            },
          },
          ...errorResponses,
        },
      },
    },
    async (request) => {
      requireAdmin(request);
      return repository
        .refused()
        .map(({ etag: _etag, ...refused }) => refused)
        .sort((a, b) => a.id.localeCompare(b.id));
    },
  );

  registerApplicationQuotaRoutes(app, kit);
}
