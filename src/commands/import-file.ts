import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import { z } from 'zod';
import { applicationIdOf } from '../applications/application-ids.js';
import type { ApplicationDirectory } from '../applications/application-directory.js';
import { storedApplicationSchema, type StoredApplication } from '../applications/application-schema.js';
import type { Config } from '../config/schema.js';
import { ConfigError } from '../kit/config-error.js';
import { declaredListProblems, declaredQuotaSchema, type DeclaredQuota } from '../quota/declared-quotas.js';
import { catalogIds } from '../quota/catalog-references.js';
import { fieldPath } from '../quota/schema-problems.js';

/**
 * What `gateway quotas import` reads: the quotas of a file and, when it has them, the applications made
 * through the portal API that `export` wrote beside them (as stored: their keys as digests).
 */
export interface ImportFile {
  quotas: DeclaredQuota[];
  /** Absent when the file has no `applications` list (a `quotas` list alone leaves them all alone). */
  applications?: StoredApplication[];
}

/**
 * The content of an import file (`{quotas, applications?}`, or a list of quotas alone; YAML or JSON),
 * checked against the catalog and applications of the config: every mistake at once, named by file and
 * key path. A quota may belong to an application of the file.
 * @throws ConfigError
 */
export function readImportFile(
  file: string,
  config: Pick<Config, 'apis' | 'applications' | 'APIKeyAuthType'>,
  made: Pick<ApplicationDirectory, 'nameOf'>,
): ImportFile {
  let document: unknown;
  try {
    document = YAML.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError([`${file}: cannot read: ${(error as Error).message.split('\n')[0]}`]);
  }
  const whole = Array.isArray(document)
    ? { quotas: document }
    : ((document ?? {}) as Record<string, unknown>);
  const at = (path: ReadonlyArray<PropertyKey>) => `${file}: ${fieldPath(path)}`;
  const problems: string[] = [];

  const applications = z
    .array(storedApplicationSchema, { error: 'must be a list of applications' })
    .optional()
    .safeParse(whole.applications);
  if (!applications.success)
    problems.push(
      ...applications.error.issues.map((issue) => `${at(['applications', ...issue.path])}: ${issue.message}`),
    );
  const listed = new Map((applications.data ?? []).map((application) => [application.id, application.name]));
  const names = { nameOf: (id: string) => made.nameOf(id) ?? listed.get(id.toLowerCase()) };

  const listName = Array.isArray(document) ? '' : 'quotas';
  const prefix = listName ? [listName] : [];
  const quotaAt = (path: ReadonlyArray<PropertyKey>) =>
    path.length > 0 ? at([...prefix, ...path]) : at(['quotas']);
  const list = whole.quotas;
  const quotas = z
    .array(
      declaredQuotaSchema(() => catalogIds(config.apis)),
      { error: 'must be a list of quotas' },
    )
    .safeParse(list);
  if (!quotas.success)
    problems.push(...quotas.error.issues.map((issue) => `${quotaAt(issue.path)}: ${issue.message}`));
  if (Array.isArray(list)) {
    const named = list.filter(
      (item): item is { id: string; application?: string } =>
        typeof (item as { id?: unknown })?.id === 'string',
    );
    problems.push(
      ...declaredListProblems(named, listName).map(({ path, message }) => `${quotaAt(path)}: ${message}`),
    );
    list.forEach((item, i) => {
      const application = (item as { application?: unknown } | null)?.application;
      if (typeof application === 'string' && applicationIdOf(config, application, names) === null)
        problems.push(
          `${quotaAt([i, 'application'])}: no application has id '${application}' (in conf/, made through the admin API, or in the file's applications)`,
        );
    });
  }
  if (!quotas.success || !applications.success || problems.length > 0) throw new ConfigError(problems);
  return {
    quotas: quotas.data,
    ...(applications.data === undefined ? {} : { applications: applications.data }),
  };
}
