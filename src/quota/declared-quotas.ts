import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { ConfigError } from '../kit/config-error.js';
import type { Logger } from '../observe/log.js';
import { longestApplicationId, wellKnownQuotaIds, type QuotaRecord, type StoredQuota } from './model.js';
import type { QuotaRepository } from './quota-repository.js';
import { quotaDtoSchema, type CatalogSource } from './quota-schema.js';

/**
 * A quota as a file declares it (`quotas` in conf/, and what `gateway quotas export` writes and `import`
 * reads): the QuotaDTO with the id the file fixes and, for an application's own quota, the application.
 */
export function declaredQuotaSchema(catalog?: CatalogSource) {
  const dto = quotaDtoSchema(catalog);
  return dto
    .omit({ system: true })
    .extend({
      id: z
        .string({ error: 'is required' })
        .regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, {
          error: 'must be a UUID',
        })
        .transform((id) => id.toLowerCase())
        .meta({
          description:
            'The id the file fixes (the well-known ids set the System and Application Default quotas)',
        }),
      application: z
        .string({ error: 'must be a string' })
        .min(1, { error: `must be 1 to ${longestApplicationId} characters` })
        .max(longestApplicationId, { error: `must be 1 to ${longestApplicationId} characters` })
        .optional()
        .meta({ description: 'The application whose own quota this is (type APPLICATION)' }),
    })
    .superRefine((quota, ctx) => {
      if (
        quota.application !== undefined &&
        (quota.type !== 'APPLICATION' || wellKnownQuotaIds.has(quota.id))
      )
        ctx.addIssue({
          code: 'custom',
          path: ['application'],
          message:
            'only a quota of type APPLICATION that is not a well-known quota can belong to an application',
        });
    });
}

export type DeclaredQuota = z.output<ReturnType<typeof declaredQuotaSchema>>;

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

/** The record a declaration stores: a well-known id keeps its type and is a system quota. */
function recordOf(declared: DeclaredQuota): QuotaRecord {
  const { id, type, name, description, restrictions, application } = declared;
  return {
    quota: { id, type, name, description, restrictions, system: wellKnownQuotaIds.has(id) },
    ...(application === undefined ? {} : { application }),
  };
}

/**
 * What writing `wanted` into a store that holds `current` does, quota by quota, and what cannot be done
 * (a well-known quota given another type; an application that has another quota of its own, made
 * through the admin API: the file would take it away silently).
 */
export function planQuotas(
  current: readonly StoredQuota[],
  wanted: readonly DeclaredQuota[],
): { changes: QuotaChange[]; problems: string[] } {
  const byId = new Map(current.map((record) => [record.quota.id, record]));
  const changes: QuotaChange[] = [];
  const problems: string[] = [];
  for (const declared of wanted) {
    const stored = byId.get(declared.id);
    const record = recordOf(declared);
    const named = {
      id: declared.id,
      name: declared.name,
      ...(declared.application ? { application: declared.application } : {}),
    };
    if (stored && wellKnownQuotaIds.has(declared.id) && stored.quota.type !== declared.type) {
      problems.push(
        `quota '${declared.id}': type must stay ${stored.quota.type} for the well-known quota '${stored.quota.name}'`,
      );
      continue;
    }
    if (stored && stored.application !== declared.application) {
      problems.push(
        `quota '${declared.id}': is stored as the own quota of ${stored.application ? `application '${stored.application}'` : 'no application'}, not of ${declared.application ? `'${declared.application}'` : 'none'}`,
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
    if (!stored) changes.push({ action: 'create', ...named });
    else if (isDeepStrictEqual(stored.quota, record.quota)) changes.push({ action: 'unchanged', ...named });
    else changes.push({ action: 'replace', ...named });
  }
  return { changes, problems };
}

/**
 * Writes the declarations a plan creates or replaces, one by one; unchanged ones are left alone.
 * @throws Error saying how many were written when the store fails part way (each write is atomic, the
 * whole is not): writing the same file again completes it
 */
export async function applyQuotas(
  repository: Pick<QuotaRepository, 'create' | 'replace'>,
  wanted: readonly DeclaredQuota[],
  changes: readonly QuotaChange[],
): Promise<void> {
  const byId = new Map(wanted.map((declared) => [declared.id, declared]));
  const writes = changes.filter((change) => change.action !== 'unchanged');
  for (const [written, change] of writes.entries()) {
    const record = recordOf(byId.get(change.id)!);
    try {
      if (change.action === 'create') await repository.create(record);
      else await repository.replace(record);
    } catch (error) {
      throw new Error(
        `${written} of ${writes.length} quotas were written when the store failed at quota '${change.id}' (${(error as Error).message}); the others were not: write them again`,
      );
    }
  }
}

/** The stored quotas as a file declares them: what `gateway quotas export` writes. */
export function declarationsOf(records: readonly StoredQuota[]): Array<Record<string, unknown>> {
  return [...records]
    .sort((a, b) => Number(b.quota.system) - Number(a.quota.system) || a.quota.id.localeCompare(b.quota.id))
    .map(({ quota: { system: _system, ...quota }, application }) => ({
      ...quota,
      ...(application === undefined ? {} : { application }),
    }));
}

/** The quotas of conf/, checked against the store and ready to be written. */
export interface DeclaredQuotasPlan {
  changes: QuotaChange[];
  /** Writes the new and changed ones, and logs each (a replaced one with what the store held). */
  apply(logger: Logger): Promise<void>;
}

/**
 * Plans writing the `quotas` of conf/ into the store (at start and at each reload).
 * @throws ConfigError when one cannot be written without taking away what the admin API made
 */
export function planDeclaredQuotas(
  repository: Pick<QuotaRepository, 'all' | 'create' | 'replace'>,
  declared: readonly DeclaredQuota[],
): DeclaredQuotasPlan {
  const before = repository.all();
  const { changes, problems } = planQuotas(before, declared);
  if (problems.length > 0) throw new ConfigError(problems.map((problem) => `quotas: ${problem}`));
  return {
    changes,
    async apply(logger) {
      await applyQuotas(repository, declared, changes);
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
