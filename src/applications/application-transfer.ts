import { isDeepStrictEqual } from 'node:util';
import type { QuotaRepository, QuotaWrite } from '../quota/quota-repository.js';
import type { ApplicationRepository, ApplicationWrite } from './application-repository.js';
import type { StoredApplication } from './application-schema.js';

/**
 * Moving the applications made through the portal API from one store to another: `gateway quotas
 * export` writes them as they are stored (their keys as SHA-256 digests, never a key), and `import`
 * writes them into the store of the config, as it does quotas.
 */

export interface ApplicationChange {
  action: 'create' | 'replace' | 'unchanged';
  id: string;
  name: string;
}

/** The applications of a store in the order an export lists them. */
export function exportedApplications(applications: readonly StoredApplication[]): StoredApplication[] {
  return [...applications].sort((a, b) => a.id.localeCompare(b.id));
}

/**
 * What writing `wanted` (an import file's list, named `listName`) into a store that holds `current`
 * does, application by application, the writes that do it (for one `writeAll`), and what cannot be done,
 * each with its path in the list: an id twice; the id of an application of conf/ (`declared`), which
 * would answer to both; a key whose digest another application's key has (the key would open requests
 * as either).
 */
export function planApplications(
  current: readonly StoredApplication[],
  wanted: readonly StoredApplication[],
  declared: ReadonlyArray<{ id: string }>,
  listName: string,
): {
  changes: ApplicationChange[];
  writes: ApplicationWrite[];
  problems: Array<{ path: Array<string | number>; message: string }>;
} {
  const stored = new Map(current.map((application) => [application.id, application]));
  const declaredAt = new Map(declared.map((application, i) => [application.id.toLowerCase(), i]));
  const listedAt = new Map<string, number>();
  const digests = new Map<string, string>();
  for (const application of current)
    if (!wanted.some((candidate) => candidate.id === application.id))
      for (const key of application.keys) digests.set(key.digest, application.id);
  const changes: ApplicationChange[] = [];
  const writes: ApplicationWrite[] = [];
  const problems: Array<{ path: Array<string | number>; message: string }> = [];
  wanted.forEach((application, i) => {
    const { id } = application;
    const earlier = listedAt.get(id);
    if (earlier !== undefined) {
      problems.push({ path: [i, 'id'], message: `duplicate of ${listName}[${earlier}].id` });
      return;
    }
    listedAt.set(id, i);
    const inConf = declaredAt.get(id);
    if (inConf !== undefined)
      problems.push({
        path: [i, 'id'],
        message: `the application applications[${inConf}] of conf/ has this id; give one of them another`,
      });
    application.keys.forEach((key, k) => {
      const other = digests.get(key.digest);
      if (other !== undefined)
        problems.push({
          path: [i, 'keys', k, 'digest'],
          message: `the same key as one of application '${other}': a key opens requests as one application`,
        });
      else digests.set(key.digest, id);
    });
    const previous = stored.get(id);
    const action = !previous ? 'create' : isDeepStrictEqual(previous, application) ? 'unchanged' : 'replace';
    changes.push({ action, id, name: application.name });
    if (action !== 'unchanged') writes.push({ application, previous });
  });
  return { changes, writes, problems };
}

/**
 * Writes what an import changes: the quotas all or none, then the applications all or none. Quotas
 * first, so that no application's key opens requests before its quota is in force. The two are two
 * writes (with Redis, two hashes in different Cluster slots), so the error of the second says what the
 * first wrote.
 * @throws Error saying what was written and what to do
 */
export async function writeQuotasThenApplications(
  stores: {
    quotas: Pick<QuotaRepository, 'writeAll'>;
    applications: Pick<ApplicationRepository, 'writeAll'>;
  },
  quotas: readonly QuotaWrite[],
  applications: readonly ApplicationWrite[],
): Promise<void> {
  try {
    await stores.quotas.writeAll(quotas);
  } catch (error) {
    throw new Error(`the store did not take the quotas (${(error as Error).message}): nothing was written`);
  }
  try {
    await stores.applications.writeAll(applications);
  } catch (error) {
    throw new Error(
      `the quotas were written, the applications were not (${(error as Error).message}): import the same file again to write them`,
    );
  }
}
