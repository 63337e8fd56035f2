import { createHash, randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isDeepStrictEqual } from 'node:util';
import {
  applicationDefaultQuotaId,
  longestApplicationId,
  type Quota,
  type QuotaRecord,
  type Restriction,
  type StoredQuota,
} from '../quota/model.js';
import type { CatalogIds } from '../quota/catalog-references.js';
import { limitText } from '../console/logic/restriction-text.js';
import { setEtag } from './entity-tags.js';
import { membershipRecord, notAPlan } from '../quota/plans.js';
import { applicationQuotaDtoSchema, type ApplicationQuotaDto } from '../quota/quota-schema.js';
import { AdminError, errorResponses } from './admin-errors.js';
import { noteTarget } from './admin-audit.js';
import {
  createdQuotaLocation,
  ifMatchHeaders,
  quotaAnswer,
  quotaLocation,
  requireAdmin,
  unreadable,
  type IdRequest,
  type QuotaRouteKit,
  type WriteTarget,
} from './quota-route-kit.js';
import { documentedAs } from './zod-route-schemas.js';
import { counterBasesOf } from '../quota/restriction-counters.js';

/** An application id may be a whole LDAP DN, percent-encoded in the path. */
const applicationParams = z.object({
  id: z
    .string()
    .max(longestApplicationId, { error: `must be at most ${longestApplicationId} characters` })
    .meta({
      description: `The application id (at most ${longestApplicationId} characters; an LDAP DN, percent-encoded, is one)`,
    }),
});

/** The body of a reset: the indexes of the restrictions to reset (none: all of them). */
const resetBody = z
  .strictObject({
    restrictions: z.array(z.int().min(0)).min(1).optional().meta({
      description: 'Indexes of restrictions of the quota in force for the application; all when absent',
    }),
  })

  // A POST without a body resets every restriction.
  .nullish();
type ResetBody = z.infer<typeof resetBody>;

/** A quota answered to the write that took an application off the Application Default, with `warnings`. */
const firstQuotaAnswer = (description: string, headers: Record<string, unknown> = {}) => {
  const { $ref, ...answer } = quotaAnswer(description, headers);
  return {
    ...answer,
    allOf: [
      { $ref },
      {
        type: 'object',
        properties: {
          warnings: {
            type: 'array',
            items: { type: 'string' },
            description:
              'Each restriction of the Application Default that no longer counts the application (its new quota or plan lacks it): add it there to keep it. Only in the answer to the write that takes the application off the Application Default, and only when it loses one',
          },
        },
      },
    ],
  };
};

type ApplicationBodyRequest = FastifyRequest<{ Params: { id: string }; Body: ApplicationQuotaDto }>;

/** Restrictions compared as stored: canonical values, a key left undefined the same as one left out. */
const sameRestriction = (a: Restriction, b: Restriction) =>
  isDeepStrictEqual(JSON.parse(JSON.stringify(a)), JSON.parse(JSON.stringify(b)));

/** "every API", "Pet Store", "Pet Store › getPet": what a restriction counts, by the catalog's names. */
function scopeOf(restriction: Restriction, catalog: CatalogIds): string {
  if (restriction.api === '*') return 'every API';
  const entry = catalog.get(restriction.api.toLowerCase());
  const api = entry?.api.name ?? restriction.api;
  if (restriction.method === '*') return api;
  return `${api} › ${entry?.methods.get(restriction.method.toLowerCase())?.name ?? restriction.method}`;
}

/**
 * What an application leaves behind when it gets a quota of its own or a plan: every restriction of the
 * Application Default stops counting it, and each that `restrictions` (what counts it now) lacks is gone
 * for it (a token budget, a concurrency cap), in words.
 */
function lostDefaults(
  defaults: readonly Restriction[],
  restrictions: readonly Restriction[],
  catalog: CatalogIds,
): string[] {
  return defaults.flatMap((restriction, i) =>
    restrictions.some((kept) => sameRestriction(kept, restriction))
      ? []
      : [
          `the Application Default's restriction ${i + 1} (${limitText(restriction)} on ${scopeOf(restriction, catalog)}) no longer counts this application: add it to its quota to keep it`,
        ],
  );
}

/**
 * The ETag of an application's quota when the application is on a plan: it changes when the
 * membership or the plan changes, as the answer does.
 */
const onPlanEtag = (membership: StoredQuota, plan: StoredQuota) =>
  createHash('sha1').update(`${membership.etag}:${plan.etag}`).digest('hex');

/**
 * An application's quota (`/applications/{id}/quota`): its own, the plan it is on, or the Application
 * Default. A PUT gives it restrictions of its own or puts it on a plan (`{"plan": "<id>"}`); a DELETE
 * returns it to the Application Default.
 */
export function registerApplicationQuotaRoutes(app: FastifyInstance, kit: QuotaRouteKit): void {
  const { repository } = kit;
  const applicationQuotaBody = documentedAs(
    applicationQuotaDtoSchema(() => kit.catalog),
    'ApplicationQuotaDTO',
  );

  /** An application's own quota: always of type APPLICATION, named after the application unless named. */
  const buildOwn = (dto: ApplicationQuotaDto, id: string, applicationId: string): Quota => {
    const type = dto.type ?? 'APPLICATION';
    if (type !== 'APPLICATION')
      throw new AdminError(400, ["type: must be APPLICATION for an application's quota"]);
    const name = dto.name ?? `${kit.names.nameOf(applicationId)} quota`.slice(0, 200);
    return kit.build({ ...dto, type, name, restrictions: dto.restrictions ?? [] }, id, false);
  };

  /** The plan a body puts the application on: 400 when the id names no plan. */
  const planOf = (dto: ApplicationQuotaDto): string | undefined => {
    if (dto.plan === undefined) return undefined;
    const problem = notAPlan(dto.plan, repository.get(dto.plan));
    if (problem) throw new AdminError(400, [`plan: ${problem}`]);
    if (dto.type !== undefined && dto.type !== 'APPLICATION')
      throw new AdminError(400, ["type: must be APPLICATION for an application's quota"]);
    return dto.plan;
  };

  /** The plan a membership names, as stored: a plan the schema refuses is a 500 that says so. */
  const planOfMembership = (membership: StoredQuota): StoredQuota => {
    const refused = kit.refusedWith((candidate) => candidate.id === membership.plan);
    if (refused) throw unreadable(refused);
    const plan = repository.get(membership.plan!);
    if (!plan) throw new AdminError(500, [`the plan '${membership.plan}' of this application is missing`]);
    return plan;
  };

  /**
   * What an application's quota is answered as: its own or the Application Default, or the plan it is on.
   * A 201 says where the quota it created is read.
   */
  const answer = (
    reply: FastifyReply,
    record: StoredQuota,
    status = 200,
    extra: { warnings?: string[] } = {},
  ) => {
    if (status === 201) reply.header('location', quotaLocation(record.quota.id));
    if (record.plan === undefined) {
      setEtag(reply, record);
      return reply.code(status).send({ ...kit.shown(record), ...extra });
    }
    const plan = planOfMembership(record);
    reply.header('etag', `"${onPlanEtag(record, plan)}"`);
    return reply
      .code(status)
      .send({ ...kit.shown(plan), plan: { id: plan.quota.id, name: plan.quota.name }, ...extra });
  };

  /**
   * Stores the first record of an application (its own quota, or its membership of a plan), which takes
   * it off the Application Default, and answers it with the restrictions of the Application Default it
   * no longer has.
   */
  const createFirst = async (reply: FastifyReply, record: QuotaRecord, status: number) => {
    const stored = await repository.create(record);
    const counting = record.plan === undefined ? record.quota : repository.get(record.plan)?.quota;
    const defaults = repository.get(applicationDefaultQuotaId)?.quota.restrictions ?? [];
    const warnings = lostDefaults(defaults, counting?.restrictions ?? [], kit.catalog);
    // Absent when nothing is lost: the answer is then the one a read gives.
    return answer(reply, stored, status, warnings.length > 0 ? { warnings } : {});
  };

  /** An application put on a plan in conf/ changes there: no reload could undo a change then. */
  const requireUndeclaredPlan = (applicationId: string) => {
    const at = kit.parts.live.config.applications.findIndex(
      (declared) => declared.id === applicationId && declared.plan !== undefined,
    );
    if (at !== -1)
      throw new AdminError(403, [
        `application '${applicationId}' is put on a plan in conf/ (applications[${at}].plan): change it there and reload`,
      ]);
  };

  /** The application's own record, to replace or delete: a stored definition the schema refuses is one too. */
  const ownQuota = async (applicationId: string): Promise<WriteTarget> => {
    const refused = kit.refusedWith((candidate) => candidate.application === applicationId);
    if (refused) return kit.refusedTarget(refused);
    const own = repository.ofApplication(applicationId);
    if (!own)
      throw new AdminError(404, [`application '${applicationId}' has no quota of its own; POST creates one`]);
    const target = kit.targetOf(own);
    return own.plan === undefined ? target : { ...target, etag: onPlanEtag(own, planOfMembership(own)) };
  };

  /** The record a body stores for the application under `id`: a membership, or its own quota. */
  const recordOf = (dto: ApplicationQuotaDto, id: string, applicationId: string) => {
    const plan = planOf(dto);
    return plan === undefined
      ? { quota: buildOwn(dto, id, applicationId), application: applicationId }
      : membershipRecord(id, applicationId, plan);
  };

  /**
   * The application a change acts on, as principals carry it (with ldap, the entry's identity), for the
   * audit line; and the quota, or the plan, its record is.
   */
  const noteApplication = (request: FastifyRequest, applicationId: string) =>
    noteTarget(request, { application: applicationId });
  const noteRecord = (request: FastifyRequest, record: { quota: { id: string }; plan?: string }) =>
    noteTarget(request, record.plan === undefined ? { quota: record.quota.id } : { plan: record.plan });

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
      "An application's quota: its own, else the plan it is on (with `plan`), else the Application Default; one no longer in conf/ or the directory too, while a quota is stored for it",
      { 200: quotaAnswer('The quota') },
    ),
    async (request: IdRequest, reply) => {
      const applicationId = await kit.applicationOrLeaver(request.params.id);
      const refused = kit.refusedWith((candidate) => candidate.application === applicationId);
      if (refused) throw unreadable(refused);
      return answer(reply, repository.ofApplication(applicationId) ?? kit.found(applicationDefaultQuotaId));
    },
  );

  app.post(
    '/applications/:id/quota',
    applicationSchema(
      'createApplicationQuota',
      'Give an application a quota of its own, or put it on a plan (`{"plan": "<id>"}`)',
      { 201: firstQuotaAnswer('Created', createdQuotaLocation) },
      { body: true },
    ),
    async (request: ApplicationBodyRequest, reply) => {
      requireAdmin(request);
      const applicationId = await kit.application(request.params.id);
      noteApplication(request, applicationId);
      requireUndeclaredPlan(applicationId);
      const record = recordOf(request.body, randomUUID(), applicationId);
      noteRecord(request, record);
      if (
        repository.ofApplication(applicationId) ||
        kit.refusedWith((candidate) => candidate.application === applicationId)
      ) {
        throw new AdminError(409, [`application '${applicationId}' already has a quota; PUT updates it`]);
      }
      return createFirst(reply, record, 201);
    },
  );

  app.put(
    '/applications/:id/quota',
    applicationSchema(
      'updateApplicationQuota',
      'Give an application restrictions of its own (201 when it had none), or put it on a plan with `{"plan": "<id>"}` (200)',
      {
        200: firstQuotaAnswer('Updated, or put on the plan (`warnings` when it had no quota or plan before)'),
        201: firstQuotaAnswer('Created', createdQuotaLocation),
      },
      { body: true, ifMatch: true },
    ),
    async (request: ApplicationBodyRequest, reply) => {
      requireAdmin(request);
      const applicationId = await kit.application(request.params.id);
      noteApplication(request, applicationId);
      requireUndeclaredPlan(applicationId);
      // The plan's quota already exists: putting an application on it creates nothing a client can address.
      const status = (created: boolean) => (created && request.body.plan === undefined ? 201 : 200);
      const hasOwn =
        repository.ofApplication(applicationId) ??
        kit.refusedWith((candidate) => candidate.application === applicationId);
      if (!hasOwn) {
        // If-Match, even `*`, asks for a quota that exists (RFC 9110 §13.1.1).
        if (request.headers['if-match'] !== undefined)
          throw new AdminError(412, [`application '${applicationId}' has no quota of its own to match`]);
        const record = recordOf(request.body, randomUUID(), applicationId);
        noteRecord(request, record);
        return createFirst(reply, record, status(true));
      }
      const current = await ownQuota(applicationId);
      kit.requireUndeclared(current.id);
      const record = recordOf(request.body, current.id, applicationId);
      noteRecord(request, record);
      return answer(
        reply,
        await repository.replace(record, kit.storedIfMatch(request, current)),
        status(false),
      );
    },
  );

  app.delete(
    '/applications/:id/quota',
    applicationSchema(
      'deleteApplicationQuota',
      'Return an application to the Application Default quota (from its own quota, or off its plan); one no longer in conf/ or the directory too, named by its id as stored',
      { 204: { description: 'Deleted', type: 'null' } },
      { ifMatch: true },
    ),
    async (request: IdRequest, reply) => {
      requireAdmin(request);
      const applicationId = await kit.applicationOrLeaver(request.params.id);
      noteApplication(request, applicationId);
      requireUndeclaredPlan(applicationId);
      const current = await ownQuota(applicationId);
      const own = repository.ofApplication(applicationId);
      noteRecord(request, own ?? { quota: { id: current.id } });
      kit.requireUndeclared(current.id);
      await repository.remove(current.id, kit.storedIfMatch(request, current));
      return reply.code(204).send();
    },
  );

  app.post(
    '/applications/:id/quota/reset',
    {
      schema: {
        summary:
          "Set to zero the application's counters of the quota in force for it (its own, its plan's or the Application Default's), every gateway at once; `restrictions` narrows it to those indexes",
        operationId: 'resetApplicationQuota',
        tags: ['applications'],
        params: applicationParams,
        body: resetBody,
        response: { 204: { description: 'Reset', type: 'null' }, ...errorResponses },
      },
    },
    async (request: FastifyRequest<{ Params: { id: string }; Body: ResetBody }>, reply) => {
      requireAdmin(request);
      const applicationId = await kit.application(request.params.id);
      noteApplication(request, applicationId);
      const quota = quotaInForce(applicationId);
      const indexes = request.body?.restrictions;
      noteTarget(request, {
        quota: quota.id,
        ...(indexes === undefined ? {} : { restrictions: indexes.join(',') }),
      });
      const bad = (indexes ?? []).filter((index) => index >= quota.restrictions.length);
      if (bad.length > 0) {
        throw new AdminError(
          400,
          bad.map(
            (index) =>
              `restrictions: quota '${quota.id}' has no restriction ${index} (it has ${quota.restrictions.length})`,
          ),
        );
      }
      const keyBases = counterBasesOf(quota, true);
      const chosen = indexes === undefined ? keyBases : indexes.map((index) => keyBases[index]!);
      // Enforced twins share one counter: it is raised once.
      if (chosen.length > 0) await repository.reset(applicationId, [...new Set(chosen)]);
      return reply.code(204).send();
    },
  );

  /**
   * The quota whose restrictions count the application now, as the quota index picks it: its own, the
   * plan it is on, else (none, or a plan stored in a form this gateway refuses) the Application Default.
   */
  const quotaInForce = (applicationId: string): Quota => {
    const own = repository.ofApplication(applicationId);
    const record = own?.plan === undefined ? own : repository.get(own.plan);
    return (record ?? kit.found(applicationDefaultQuotaId)).quota;
  };
}
