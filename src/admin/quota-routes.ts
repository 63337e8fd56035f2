import { randomUUID } from 'node:crypto';
import type { Identification } from '../auth/authenticator.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { LiveConfig } from '../config/live-config.js';
import {
  longestApplicationId,
  applicationDefaultQuotaId,
  systemQuotaId,
  wellKnownQuotaIds,
  wellKnownQuotas,
  type Quota,
  type QuotaDto,
  type QuotaType,
  type StoredQuota,
} from '../quota/model.js';
import type { QuotaRepository, RefusedQuota } from '../quota/quota-repository.js';
import {
  applicationQuotaDtoSchema,
  catalogIds,
  quotaDtoSchema,
  type ApplicationQuotaDto,
} from '../quota/quota-schema.js';
import type { QuotaUsage } from '../quota/quota-usage.js';
import {
  rejectionBucketSeconds,
  rejectionSeries,
  type RejectionSource,
} from '../observe/rejection-history.js';
import { AdminError, errorResponses } from './admin-errors.js';
import type { ApplicationDirectory } from '../applications/application-directory.js';
import { ApplicationNames } from '../config/application-names.js';
import { applicationIdOf } from '../applications/application-ids.js';
import { requiredEtag, setEtag } from './entity-tags.js';
import { documentedAs } from './zod-route-schemas.js';

export interface QuotaRoutesParts {
  /** The config in force: restrictions must name APIs and methods of its catalog. */
  live: LiveConfig;
  repository: QuotaRepository;
  usage: (quotaId: string) => Promise<QuotaUsage | null>;
  rejections: RejectionSource;
  /** The clock the rejection histories are kept by. */
  now?: () => number;
  /** The applications made through the portal API: they may have quotas too. */
  made: ApplicationDirectory;
  /** What the scheme's directory says a name stands for (ldap); undefined where the scheme cannot tell. */
  identify?: (name: string) => Promise<Identification> | undefined;
}

const etagHeader = {
  ETag: { type: 'string', description: 'The entity tag of the quota, for If-Match on PUT and DELETE' },
};
/** A quota answered with its ETag (and, for `extra`, more response fields). */
const quotaAnswer = (description: string, extra: Record<string, unknown> = {}) => ({
  description,
  headers: { ...etagHeader, ...extra },
  $ref: 'Quota#',
});
const quotaResponse = (status: number, description: string, extra: Record<string, unknown> = {}) => ({
  [status]: quotaAnswer(description, extra),
  ...errorResponses,
});
/** `If-Match` of PUT and DELETE (other fields pass through untouched). */
const ifMatchHeaders = z.looseObject({
  'if-match': z
    .string()
    .optional()
    .meta({ description: 'The ETag the quota must still have (412 otherwise); * or none to skip' }),
});
const idParams = z.object({
  id: z
    .string()
    .max(200, { error: 'must be at most 200 characters' })
    .meta({ description: 'The id (at most 200 characters)' }),
});
/** An application id may be a whole LDAP DN, percent-encoded in the path. */
const applicationParams = z.object({
  id: z
    .string()
    .max(longestApplicationId, { error: `must be at most ${longestApplicationId} characters` })
    .meta({
      description: `The application id (at most ${longestApplicationId} characters; an LDAP DN, percent-encoded, is one)`,
    }),
});
const putQuery = z.object({
  quota: z
    .string({ error: 'must be a string' })
    .optional()
    .meta({ description: "The seed's `quota` parameter: accepted, not used" }),
});

/** What a write acts on: a stored quota, or a stored definition the quota schema refuses. */
interface WriteTarget {
  id: string;
  etag: string;
  system: boolean;
  /** The type the quota must keep, if any: the well-known quotas' and applications' own quotas'. */
  keepsType?: QuotaType;
  /** A well-known quota's description, kept by a PUT that sends none (clients send only restrictions). */
  keepsDescription?: string;
}

const wellKnownTypes = new Map(wellKnownQuotas().map((record) => [record.quota.id, record.quota.type]));

/** The answer to a read of a stored definition the quota schema refuses. */
const unreadable = (refused: RefusedQuota) =>
  new AdminError(
    500,
    [
      `quota '${refused.id}' is stored in a form this gateway refuses (${refused.problems.join('; ')}); PUT a valid quota to replace it, or DELETE it`,
    ],
    { etag: `"${refused.etag}"` },
  );

type IdRequest = FastifyRequest<{ Params: { id: string } }>;
type BodyRequest = FastifyRequest<{ Params: { id: string }; Body: QuotaDto }>;
type ApplicationBodyRequest = FastifyRequest<{ Params: { id: string }; Body: ApplicationQuotaDto }>;

function requireAdmin(request: FastifyRequest): void {
  if (request.adminUser?.role !== 'admin')
    throw new AdminError(403, ['only an API Administrator may do this']);
}

/** The seed's Quota REST API and the applications' own quotas, under /api/portal/v1.3. */
export function registerQuotaRoutes(app: FastifyInstance, parts: QuotaRoutesParts): void {
  const { repository, live } = parts;
  // Restrictions must name APIs and methods of the catalog in force: checked in the same pass as the rest.
  let catalog = catalogIds(live.config.apis);
  let names = new ApplicationNames(live.config.applications, parts.made);
  live.onChange(({ config }) => {
    catalog = catalogIds(config.apis);
    names = new ApplicationNames(config.applications, parts.made);
  });
  const owner = (application: string) => ({ id: application, name: names.nameOf(application) });
  /** A quota declared in conf/ changes there, never through the API: no reload could undo a change then. */
  const requireUndeclared = (id: string) => {
    const at = live.config.quotas.findIndex((declared) => declared.id === id);
    if (at !== -1)
      throw new AdminError(403, [
        `quota '${id}' is declared in conf/ (quotas[${at}]): change it there and reload (gateway reload)`,
      ]);
  };
  /** A quota as answered: an application's own quota names the application. */
  const shown = (record: StoredQuota) => ({
    ...record.quota,
    ...(record.application ? { application: owner(record.application) } : {}),
    ...(live.config.quotas.some((declared) => declared.id === record.quota.id) ? { declared: true } : {}),
  });
  const quotaBody = documentedAs(
    quotaDtoSchema(() => catalog),
    'QuotaDTO',
  );
  const applicationQuotaBody = documentedAs(
    applicationQuotaDtoSchema(() => catalog),
    'ApplicationQuotaDTO',
  );

  const build = (dto: QuotaDto, id: string, system: boolean): Quota => ({
    id,
    type: dto.type,
    name: dto.name,
    description: dto.description,
    restrictions: dto.restrictions,
    system,
  });

  const refusedWith = (match: (refused: RefusedQuota) => boolean) => repository.refused().find(match);

  /** What is stored under this id: a quota, or a definition the schema refuses; 404 when neither. */
  const storedAs = (id: string): { record: StoredQuota } | { refused: RefusedQuota } => {
    const key = id.toLowerCase();
    const refused = refusedWith((candidate) => candidate.id === key);
    if (refused) return { refused };
    const record = repository.get(key);
    if (!record) throw new AdminError(404, [`no quota with id '${id}'`]);
    return { record };
  };

  /** The quota with this id, to read: a stored definition the schema refuses is a 500 that says so. */
  const found = (id: string): StoredQuota => {
    const stored = storedAs(id);
    if ('refused' in stored) throw unreadable(stored.refused);
    return stored.record;
  };

  const targetOf = (record: StoredQuota): WriteTarget => ({
    id: record.quota.id,
    etag: record.etag,
    system: record.quota.system,
    ...(record.quota.system || record.application ? { keepsType: record.quota.type } : {}),
    ...(record.quota.system && record.quota.description !== undefined
      ? { keepsDescription: record.quota.description }
      : {}),
  });

  const refusedTarget = (refused: RefusedQuota): WriteTarget => {
    const keepsType = wellKnownTypes.get(refused.id) ?? (refused.application ? 'APPLICATION' : undefined);
    return {
      id: refused.id,
      etag: refused.etag,
      system: wellKnownQuotaIds.has(refused.id),
      ...(keepsType ? { keepsType } : {}),
    };
  };

  /** The quota with this id, to replace or delete: a stored definition the schema refuses is one too. */
  const writable = (id: string): WriteTarget => {
    const stored = storedAs(id);
    return 'refused' in stored ? refusedTarget(stored.refused) : targetOf(stored.record);
  };

  const answer = (reply: FastifyReply, record: StoredQuota, status = 200) => {
    setEtag(reply, record);
    return reply.code(status).send(shown(record));
  };

  /**
   * The application `id` names, as principals carry it. With ldap that is the directory's identity of the
   * entry `id` names (a login name or a DN): a quota kept under any other spelling would match no one.
   */
  const application = async (id: string): Promise<string> => {
    const applicationId = applicationIdOf(live.config, id, parts.made);
    if (!applicationId) throw new AdminError(404, [`no application with id '${id}'`]);
    const asked = parts.identify?.(applicationId);
    if (!asked) return applicationId;
    const identification = await asked;
    if (identification === 'unavailable')
      throw new AdminError(503, ['the directory did not answer: which caller this names cannot be told']);
    if ('unknown' in identification) throw new AdminError(404, [identification.unknown]);
    return identification.identity;
  };

  app.post(
    '/quotas',
    {
      schema: {
        summary: 'Create a quota (API Administrators)',
        operationId: 'createQuota',
        tags: ['quotas'],
        body: quotaBody,
        response: quotaResponse(201, 'The created quota', {
          Location: { type: 'string', description: 'The path of the created quota' },
        }),
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
        operationId: 'listQuotas',
        tags: ['quotas'],
        response: { 200: { type: 'array', items: { $ref: 'Quota#' } }, ...errorResponses },
      },
    },
    async (request) => {
      return repository
        .all()
        .filter((record) => request.adminUser?.role === 'admin' || record.quota.id !== systemQuotaId)
        .sort(
          (a, b) => Number(b.quota.system) - Number(a.quota.system) || a.quota.id.localeCompare(b.quota.id),
        )
        .map(shown);
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
      return answer(reply, found(request.params.id));
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
      const current = writable(request.params.id);
      requireUndeclared(current.id);
      const dto = request.body;
      const quota = build(
        !sentDescription.has(request) && current.keepsDescription !== undefined
          ? { ...dto, description: current.keepsDescription }
          : dto,
        current.id,
        current.system,
      );
      if (current.keepsType && quota.type !== current.keepsType) {
        throw new AdminError(400, [`type: must stay ${current.keepsType} for this quota`]);
      }
      return answer(reply, await repository.replace({ quota }, requiredEtag(request, current)));
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
      const current = writable(request.params.id);
      requireUndeclared(current.id);
      if (wellKnownQuotaIds.has(current.id)) {
        throw new AdminError(403, ['the System and Application Default quotas cannot be deleted']);
      }
      await repository.remove(current.id, requiredEtag(request, current));
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
                    unit: { type: 'string', enum: ['messages', 'bytes'] },
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
      const { quota } = found(request.params.id);
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
                  name: names.nameOf(entry.application),
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

  /** An application's own quota: always of type APPLICATION, named after the application unless named. */
  const buildOwn = (dto: ApplicationQuotaDto, id: string, applicationId: string): Quota => {
    const type = dto.type ?? 'APPLICATION';
    if (type !== 'APPLICATION')
      throw new AdminError(400, ["type: must be APPLICATION for an application's quota"]);
    const name = dto.name ?? `${names.nameOf(applicationId)} quota`.slice(0, 200);
    return build({ ...dto, type, name }, id, false);
  };

  /** The application's own quota, to replace or delete: a stored definition the schema refuses is one too. */
  const ownQuota = async (id: string): Promise<WriteTarget> => {
    const applicationId = await application(id);
    const refused = refusedWith((candidate) => candidate.application === applicationId);
    if (refused) return refusedTarget(refused);
    const own = repository.ofApplication(applicationId);
    if (!own)
      throw new AdminError(404, [`application '${applicationId}' has no quota of its own; POST creates one`]);
    return targetOf(own);
  };

  const applicationSchema = (
    operationId: string,
    summary: string,
    success: Record<string, unknown>,
    { body = false, ifMatch = false } = {},
  ) => ({
    schema: {
      summary,
      operationId,
      tags: ['applications'],
      params: applicationParams,
      ...(ifMatch ? { headers: ifMatchHeaders } : {}),
      ...(body ? { body: applicationQuotaBody } : {}),
      response: { ...success, ...errorResponses },
    },
  });

  app.get(
    '/applications/:id/quota',
    applicationSchema(
      'getApplicationQuota',
      "An application's quota: its own, else the Application Default",
      {
        200: quotaAnswer('The quota'),
      },
    ),
    async (request: IdRequest, reply) => {
      const applicationId = await application(request.params.id);
      const refused = refusedWith((candidate) => candidate.application === applicationId);
      if (refused) throw unreadable(refused);
      return answer(reply, repository.ofApplication(applicationId) ?? found(applicationDefaultQuotaId));
    },
  );

  app.post(
    '/applications/:id/quota',
    applicationSchema(
      'createApplicationQuota',
      'Give an application a quota of its own',
      { 201: quotaAnswer('Created') },
      { body: true },
    ),
    async (request: ApplicationBodyRequest, reply) => {
      requireAdmin(request);
      const applicationId = await application(request.params.id);
      const quota = buildOwn(request.body, randomUUID(), applicationId);
      if (
        repository.ofApplication(applicationId) ||
        refusedWith((candidate) => candidate.application === applicationId)
      ) {
        throw new AdminError(409, [`application '${applicationId}' already has a quota; PUT updates it`]);
      }
      return answer(reply, await repository.create({ quota, application: applicationId }), 201);
    },
  );

  app.put(
    '/applications/:id/quota',
    applicationSchema(
      'updateApplicationQuota',
      "Update an application's own quota, or give it one (201) when it has none",
      { 200: quotaAnswer('Updated'), 201: quotaAnswer('Created') },
      { body: true, ifMatch: true },
    ),
    async (request: ApplicationBodyRequest, reply) => {
      requireAdmin(request);
      const applicationId = await application(request.params.id);
      const hasOwn =
        repository.ofApplication(applicationId) ??
        refusedWith((candidate) => candidate.application === applicationId);
      if (!hasOwn) {
        // If-Match, even `*`, asks for a quota that exists (RFC 9110 §13.1.1).
        if (request.headers['if-match'] !== undefined)
          throw new AdminError(412, [`application '${applicationId}' has no quota of its own to match`]);
        const quota = buildOwn(request.body, randomUUID(), applicationId);
        return answer(reply, await repository.create({ quota, application: applicationId }), 201);
      }
      const current = await ownQuota(request.params.id);
      requireUndeclared(current.id);
      const quota = buildOwn(request.body, current.id, applicationId);
      return answer(reply, await repository.replace({ quota }, requiredEtag(request, current)));
    },
  );

  app.delete(
    '/applications/:id/quota',
    applicationSchema(
      'deleteApplicationQuota',
      'Return an application to the Application Default quota',
      { 204: { description: 'Deleted', type: 'null' } },
      { ifMatch: true },
    ),
    async (request: IdRequest, reply) => {
      requireAdmin(request);
      const current = await ownQuota(request.params.id);
      requireUndeclared(current.id);
      await repository.remove(current.id, requiredEtag(request, current));
      return reply.code(204).send();
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
}
