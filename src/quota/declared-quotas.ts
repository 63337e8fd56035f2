import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { ConfigError } from '../kit/config-error.js';
import type { Logger } from '../observe/log.js';
import {
  longestApplicationId,
  wellKnownQuotaIds,
  wellKnownQuotas,
  type QuotaRecord,
  type StoredQuota,
} from './model.js';
import type { QuotaRepository, QuotaWrite } from './quota-repository.js';
import { membershipRecord, notAPlan, planRuleBroken } from './plans.js';
import { anyCaseUuid, quotaDtoSchema, type CatalogSource, type QuotaDto } from './quota-schema.js';

/**
 * A quota as a file declares it (`quotas` in conf/, and what `gateway quotas export` writes and `import`
 * reads): the QuotaDTO with the id the file fixes and, for an application's own quota, the application;
 * or, for an application put on a plan, the id of its record, the application and the plan alone.
 */
export function declaredQuotaSchema(catalog?: CatalogSource) {
  const dto = quotaDtoSchema(catalog);
  const onlyWithoutPlan = ' (left out with a plan)';
  return dto
    .omit({ system: true })
    .extend({
      id: uuid('The id the file fixes (the well-known ids set the System and Application Default quotas)'),
      type: dto.shape.type.optional().meta({ description: `The quota's type${onlyWithoutPlan}` }),
      name: dto.shape.name.optional().meta({ description: `The quota's name${onlyWithoutPlan}` }),
      description: dto.shape.description.unwrap().optional().meta({
        description: "The quota's description (default: a well-known quota's built-in one, else empty)",
      }),
      restrictions: dto.shape.restrictions
        .optional()
        .meta({ description: `The quota's restrictions${onlyWithoutPlan}` }),
      application: z
        .string({ error: 'must be a string' })
        .min(1, { error: `must be 1 to ${longestApplicationId} characters` })
        .max(longestApplicationId, { error: `must be 1 to ${longestApplicationId} characters` })
        .optional()
        .meta({
          description: 'The application whose own quota this is (type APPLICATION), or whom `plan` is for',
        }),
      plan: uuid(
        'Puts `application` on this plan (an APPLICATION quota no application owns) instead of giving it a quota',
      ).optional(),
    })
    .superRefine((quota, ctx) => {
      const issue = (path: string, message: string) =>
        ctx.addIssue({ code: 'custom', path: [path], message });
      const quotaFields = ['type', 'name', 'restrictions'] as const;
      if (quota.plan !== undefined) {
        if (quota.application === undefined) issue('application', 'is required with a plan');
        for (const field of quotaFields)
          if (quota[field] !== undefined) issue(field, "must be left out with a plan: the plan's is used");
        return;
      }
      for (const field of quotaFields) if (quota[field] === undefined) issue(field, 'is required');
      if (
        quota.application !== undefined &&
        quota.type !== undefined &&
        (quota.type !== 'APPLICATION' || wellKnownQuotaIds.has(quota.id))
      )
        issue(
          'application',
          'only a quota of type APPLICATION that is not a well-known quota can belong to an application',
        );
    })
    .transform(
      ({ id, type, name, description, restrictions, thresholds, application, plan }): DeclaredQuota =>
        plan === undefined
          ? {
              id,
              type: type!,
              name: name!,
              // A well-known quota declared without one keeps its own, as a PUT without one does.
              description: description ?? builtInDescriptions.get(id) ?? '',
              restrictions: restrictions!,
              ...(thresholds === undefined ? {} : { thresholds }),
              ...(application === undefined ? {} : { application }),
            }
          : { id, application: application!, plan },
    );
}

const builtInDescriptions = new Map(
  wellKnownQuotas().map(({ quota }) => [quota.id, quota.description] as const),
);

const uuid = (description: string) => anyCaseUuid('must be a UUID', 'is required').meta({ description });

/** A declared quota, with the application it belongs to when it is an application's own. */
export interface DeclaredDefinition {
  id: string;
  type: QuotaDto['type'];
  name: string;
  description: string;
  restrictions: QuotaDto['restrictions'];
  thresholds?: number[];
  application?: string;
}

/** A declared membership: `application` is on plan `plan`, by its record `id`. */
export interface DeclaredMembership {
  id: string;
  application: string;
  plan: string;
}

export type DeclaredQuota = DeclaredDefinition | DeclaredMembership;

export const isMembership = (declared: DeclaredQuota): declared is DeclaredMembership => 'plan' in declared;

/**
 * The memberships of the applications of conf/ that name a plan (`applications[].plan`), each under an
 * id made from its application's, so that every start and reload declares the same record.
 */
export function declaredMemberships(
  applications: ReadonlyArray<{ id: string; plan?: string | undefined }>,
): DeclaredMembership[] {
  return applications.flatMap(({ id, plan }) =>
    plan === undefined ? [] : [{ id: membershipIdOf(id), application: id, plan: plan.toLowerCase() }],
  );
}

/** A UUID (version 5 layout) made from the SHA-1 of the application id. */
function membershipIdOf(application: string): string {
  const hex = createHash('sha1').update(`quotagate plan membership:${application}`).digest('hex');
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/**
 * Rules across the quotas of one list: an id once, an application's own quota once.
 * @param listName how messages name the list (`quotas`)
 */
export function declaredListProblems(
  quotas: ReadonlyArray<{ id: string; application?: string | undefined }>,
  listName: string,
): Array<{ path: Array<string | number>; message: string }> {
  const problems: Array<{ path: Array<string | number>; message: string }> = [];
  const ids = new Map<string, number>();
  const applications = new Map<string, number>();
  quotas.forEach((quota, i) => {
    const earlier = ids.get(quota.id.toLowerCase());
    if (earlier !== undefined)
      problems.push({ path: [i, 'id'], message: `duplicate of ${listName}[${earlier}].id` });
    else ids.set(quota.id.toLowerCase(), i);
    if (quota.application === undefined) return;
    const before = applications.get(quota.application);
    if (before !== undefined)
      problems.push({ path: [i, 'application'], message: `already has a quota at ${listName}[${before}]` });
    else applications.set(quota.application, i);
  });
  return problems;
}

export interface QuotaChange {
  action: 'create' | 'replace' | 'unchanged';
  id: string;
  name: string;
  application?: string;
}

/**
 * Why plan `plan`, when `declared` declares it, cannot be one; undefined when it can, or when the list
 * does not declare it (the store may hold it: it is checked as it is written).
 */
export function declaredPlanProblem(declared: readonly DeclaredQuota[], plan: string): string | undefined {
  const quota = declared.find((candidate) => candidate.id === plan.toLowerCase());
  return quota && notAPlan(plan, recordOf(quota));
}

/** The record a declaration stores: a well-known id keeps its type and is a system quota. */
function recordOf(declared: DeclaredQuota): QuotaRecord {
  if (isMembership(declared)) return membershipRecord(declared.id, declared.application, declared.plan);
  const { id, type, name, description, restrictions, thresholds, application } = declared;
  return {
    quota: {
      id,
      type,
      name,
      description,
      restrictions,
      ...(thresholds === undefined ? {} : { thresholds }),
      system: wellKnownQuotaIds.has(id),
    },
    ...(application === undefined ? {} : { application }),
  };
}

/**
 * What writing `wanted` into `store` does, quota by quota, the writes that do it
 * (for one `writeAll`: all or none), and what cannot be done: a well-known quota given another type; an
 * application that has another quota of its own, made through the admin API (the file would take it
 * away silently); a rule of plans broken by the set as the whole list leaves it (a membership naming no
 * plan, or a plan made into something else while an application stays on it), whatever the order.
 */
export function planQuotas(
  store: Pick<QuotaRepository, 'all' | 'refused'>,
  wanted: readonly DeclaredQuota[],
): { changes: QuotaChange[]; writes: QuotaWrite[]; problems: string[] } {
  const current = store.all();
  const byId = new Map(current.map((record) => [record.quota.id, record]));
  // A stored text the quota schema refuses is replaced (by its own ETag), never created over.
  const unreadable = new Map(store.refused().map((refused) => [refused.id, refused]));
  const after = new Map<string, QuotaRecord>([
    ...byId,
    ...wanted.map((declared) => [declared.id, recordOf(declared)] as const),
  ]);
  const changes: QuotaChange[] = [];
  const writes: QuotaWrite[] = [];
  const problems: string[] = [];
  for (const declared of wanted) {
    // A well-known quota the schema refuses reads as its default: its type is the one to keep.
    const stored = byId.get(declared.id);
    const refused = unreadable.get(declared.id);
    const record = recordOf(declared);
    const named = {
      id: declared.id,
      name: isMembership(declared) ? `on plan ${declared.plan}` : declared.name,
      ...(declared.application ? { application: declared.application } : {}),
    };
    const notPlan = isMembership(declared) ? notAPlan(declared.plan, after.get(declared.plan)) : undefined;
    if (notPlan) {
      problems.push(`quota '${declared.id}': plan: ${notPlan}`);
      continue;
    }
    if (stored && wellKnownQuotaIds.has(declared.id) && stored.quota.type !== record.quota.type) {
      problems.push(
        `quota '${declared.id}': type must stay ${stored.quota.type} for the well-known quota '${stored.quota.name}'`,
      );
      continue;
    }
    const owner = refused ? refused.application : stored?.application;
    if ((refused || stored) && owner !== declared.application) {
      problems.push(
        `quota '${declared.id}': is stored as the own quota of ${owner ? `application '${owner}'` : 'no application'}, not of ${declared.application ? `'${declared.application}'` : 'none'}`,
      );
      continue;
    }
    if (declared.application !== undefined) {
      const other = current.find(
        (candidate) => candidate.application === declared.application && candidate.quota.id !== declared.id,
      );
      if (other) {
        problems.push(
          `quota '${declared.id}': application '${declared.application}' has another quota of its own ('${other.quota.id}'); delete it, or declare it with its id`,
        );
        continue;
      }
    }
    // The plan's own message names it, the applications on it, and the way to take them off.
    const inUse = planRuleBroken(after, declared.id, record);
    if (inUse) {
      problems.push(inUse);
      continue;
    }
    if (refused) {
      changes.push({ action: 'replace', ...named });
      writes.push({ record, etag: refused.etag });
    } else if (!stored) {
      changes.push({ action: 'create', ...named });
      writes.push({ record });
    } else if (isDeepStrictEqual(stored.quota, record.quota) && stored.plan === record.plan) {
      changes.push({ action: 'unchanged', ...named });
    } else {
      changes.push({ action: 'replace', ...named });
      writes.push({ record, etag: stored.etag });
    }
  }
  return { changes, writes, problems };
}

/** The stored quotas as a file declares them: what `gateway quotas export` writes. */
export function declarationsOf(records: readonly StoredQuota[]): Array<Record<string, unknown>> {
  return [...records]
    .sort((a, b) => Number(b.quota.system) - Number(a.quota.system) || a.quota.id.localeCompare(b.quota.id))
    .map(({ quota: { system: _system, ...quota }, application, plan }) =>
      plan === undefined
        ? { ...quota, ...(application === undefined ? {} : { application }) }
        : { id: quota.id, application, plan },
    );
}

/** The quotas of conf/, checked against the store and ready to be written. */
export interface DeclaredQuotasPlan {
  changes: QuotaChange[];
  /** Writes the new and changed ones, all or none, and logs each (a replaced one with what the store held). */
  apply(logger: Logger): Promise<void>;
}

/**
 * Plans writing the `quotas` of conf/, and the plans its applications are put on, into the store (at
 * start and at each reload).
 * @throws ConfigError when one cannot be written without taking away what the admin API made
 */
export function planDeclaredQuotas(
  repository: Pick<QuotaRepository, 'all' | 'refused' | 'writeAll'>,
  config: {
    quotas: readonly DeclaredQuota[];
    applications: ReadonlyArray<{ id: string; plan?: string | undefined }>;
  },
): DeclaredQuotasPlan {
  const declared = [...config.quotas, ...declaredMemberships(config.applications)];
  const before = repository.all();
  const { changes, writes, problems } = planQuotas(repository, declared);
  if (problems.length > 0) throw new ConfigError(problems.map((problem) => `quotas: ${problem}`));
  return {
    changes,
    async apply(logger) {
      await repository.writeAll(writes);
      for (const change of changes) {
        if (change.action === 'create')
          logger.info({ quota: change.id, name: change.name }, 'declared quota created');
        if (change.action === 'replace') {
          const previous = before.find((record) => record.quota.id === change.id)?.quota;
          logger.warn(
            { quota: change.id, name: change.name, previous },
            'declared quota replaced what the store held',
          );
        }
      }
    },
  };
}
