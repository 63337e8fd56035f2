import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { z } from 'zod';
import { applicationIdOf } from '../applications/application-ids.js';
import { ApplicationDirectory } from '../applications/application-directory.js';
import { openApplicationRepository } from '../stores/open-application-repository.js';
import { ConfigError } from '../kit/config-error.js';
import { loadConfig, type LoadedConfig } from '../config/load-config.js';
import { LogSecrets, createLogger, type Logger } from '../observe/log.js';
import {
  applyQuotas,
  declarationsOf,
  declaredListProblems,
  declaredQuotaSchema,
  planQuotas,
  type DeclaredQuota,
} from '../quota/declared-quotas.js';
import { openQuotaRepository } from '../stores/open-quota-repository.js';
import { FileQuotaRepository } from '../quota/file-quota-repository.js';
import { QuotaStoreCorrupt, type QuotaRepository } from '../quota/quota-repository.js';
import { catalogIds } from '../quota/catalog-references.js';
import { storeFileOwner } from '../quota/store-owner.js';
import { fieldPath } from '../quota/schema-problems.js';
import { openStoreRedis, redisAnswers } from '../redis/connect-redis.js';
import { secretValues } from '../kit/secret-redaction.js';
import { exitCode, parseOptions, UsageError, type Command } from './command.js';

/**
 * Opens the quota store of the config as a gateway does (with the applications made through the admin
 * API, which quotas may belong to), for one command, and closes it after.
 */
async function withStore<T>(
  loaded: LoadedConfig,
  logger: Logger,
  use: (repository: QuotaRepository, made: ApplicationDirectory) => Promise<T>,
): Promise<T> {
  const { config } = loaded;
  const redis = await openStoreRedis(config.store, logger);
  try {
    // Without Redis a gateway would fall back on its snapshot; a command must not read or write that.
    if (redis && !(await redisAnswers(redis)))
      throw new Error('Redis does not answer: nothing was read or written');
    const repository = await openQuotaRepository(config, redis, { logger, cwd: process.cwd() });
    try {
      const applications = await openApplicationRepository(config, redis, { logger, cwd: process.cwd() });
      try {
        const made = new ApplicationDirectory();
        made.follow(applications);
        return await use(repository, made);
      } finally {
        await applications.close();
      }
    } finally {
      await repository.close();
    }
  } finally {
    if (redis) await redis.quit().catch(() => redis.disconnect());
  }
}

/** The quotas of a memory store's file (`store.file`), as a file declares them. */
async function fromQuotaFile(file: string, logger: Logger): Promise<Array<Record<string, unknown>>> {
  if (!existsSync(file)) throw new UsageError(`--from-file: ${file} does not exist`);
  const repository = new FileQuotaRepository(file, logger);
  try {
    await repository.open();
  } catch (error) {
    if (error instanceof QuotaStoreCorrupt) throw new ConfigError([error.message]);
    throw error;
  }
  const quotas = declarationsOf(repository.all());
  await repository.close();
  return quotas;
}

/**
 * The quotas of an import file (a `quotas` list, or the list alone; YAML or JSON), checked against the
 * catalog and applications of the config: every mistake at once, named by file and key path.
 * @throws ConfigError
 */
export function readQuotaFile(
  file: string,
  loaded: LoadedConfig,
  made: ApplicationDirectory,
): DeclaredQuota[] {
  let document: unknown;
  try {
    document = YAML.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError([`${file}: cannot read: ${(error as Error).message.split('\n')[0]}`]);
  }
  const list = Array.isArray(document) ? document : (document as { quotas?: unknown } | null)?.quotas;
  const prefix = Array.isArray(document) ? '' : 'quotas';
  const { config } = loaded;
  const schema = z.array(
    declaredQuotaSchema(() => catalogIds(config.apis)),
    { error: 'must be a list of quotas' },
  );
  const parsed = schema.safeParse(list);
  const at = (path: ReadonlyArray<PropertyKey>) =>
    `${file}: ${fieldPath([...(prefix ? [prefix] : []), ...path]) || 'quotas'}`;
  const problems = parsed.success
    ? []
    : parsed.error.issues.map((issue) => `${at(issue.path)}: ${issue.message}`);
  if (Array.isArray(list)) {
    const named = list.filter(
      (item): item is { id: string; application?: string } =>
        typeof (item as { id?: unknown })?.id === 'string',
    );
    problems.push(
      ...declaredListProblems(named, prefix).map(({ path, message }) => `${at(path)}: ${message}`),
    );
    list.forEach((item, i) => {
      const application = (item as { application?: unknown } | null)?.application;
      if (typeof application === 'string' && applicationIdOf(config, application, made) === null)
        problems.push(
          `${at([i, 'application'])}: no application has id '${application}' (in conf/ or made through the admin API)`,
        );
    });
  }
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);
  return parsed.data;
}

export const quotasCommand: Command = {
  summary: 'export the quotas of the store, or import them from a file',
  help: `Usage: gateway quotas export [--config-dir DIR] [--format yaml|json] [--from-file FILE]
       gateway quotas import FILE [--config-dir DIR] [--dry-run]

export   writes every quota of the config's store (the memory store's file, or Redis) to standard
         output as a \`quotas\` list: the QuotaDTO of each, with its id and, for an application's own
         quota, its application; an application on a plan as its record's id, application and plan.
         It is what \`quotas\` in conf/ and \`import\` read. With
         --from-file, from that memory store's file instead (to move to Redis): no config is read.
import   reads FILE (YAML or JSON: a \`quotas\` list, or the list alone), checks every quota against
         the catalog and the applications of the config (all mistakes at once), and writes those that
         are new or changed into the store; quotas the file does not name are left alone. An
         application that has another quota of its own is a mistake, not an overwrite. With Redis the
         running gateways see the change within a second; the memory store's file belongs to its
         running gateway (it marks the file so), so import refuses while that gateway runs.
--dry-run  prints what import would do, and writes nothing.

Exit codes: 0 done, 1 the store cannot be reached or written, 2 bad usage or a file with mistakes.`,
  async run(argv) {
    const { values, positionals } = parseOptions(
      argv,
      {
        'config-dir': { type: 'string', default: 'conf' },
        format: { type: 'string', default: 'yaml' },
        'dry-run': { type: 'boolean', default: false },
        'from-file': { type: 'string' },
      },
      true,
    );
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    const [action, file, ...extra] = positionals;
    if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
    if (action !== 'export' && action !== 'import') throw new UsageError('say export or import (see --help)');
    if (values.format !== 'yaml' && values.format !== 'json')
      throw new UsageError('--format must be yaml or json');
    const write = (quotas: Array<Record<string, unknown>>) =>
      process.stdout.write(
        values.format === 'json' ? `${JSON.stringify({ quotas }, null, 2)}\n` : YAML.stringify({ quotas }),
      );
    const fromFile = values['from-file'];
    if (action === 'export' && fromFile) {
      // A memory store's file alone: no config is read, so none (keys, users) needs to be complete.
      const logger = createLogger({ level: 'warn', destination: process.stderr });
      write(await fromQuotaFile(path.resolve(fromFile), logger));
      return exitCode.ok;
    }
    const loaded = await loadConfig({ configDir: values['config-dir'] });
    const logger = createLogger({
      level: 'warn',
      destination: process.stderr,
      secrets: new LogSecrets(secretValues({ ...loaded.extras, ...loaded.config })),
    });

    if (action === 'export') {
      write(await withStore(loaded, logger, async (repository) => declarationsOf(repository.all())));
      return exitCode.ok;
    }

    if (file === undefined) throw new UsageError('import needs the FILE to read');
    const { store } = loaded.config;
    const owner = store.type === 'memory' ? storeFileOwner(path.resolve(store.file)) : null;
    if (owner !== null && !values['dry-run']) {
      process.stderr.write(
        `gateway quotas: the gateway (process ${owner}) owns ${store.file}: stop it first, or import through a Redis store\n`,
      );
      return exitCode.failure;
    }
    const dryRun = values['dry-run'];
    await withStore(loaded, logger, async (repository, made) => {
      const wanted = readQuotaFile(file, loaded, made);
      const { changes, problems } = planQuotas(repository.all(), wanted);
      if (problems.length > 0) throw new ConfigError(problems.map((problem) => `${file}: ${problem}`));
      if (!dryRun) await applyQuotas(repository, wanted, changes);
      const verb = {
        create: dryRun ? 'would create' : 'created',
        replace: dryRun ? 'would replace' : 'replaced',
        unchanged: 'unchanged',
      };
      for (const change of changes) {
        const owned = change.application ? ` (application ${change.application})` : '';
        process.stdout.write(`${verb[change.action]} ${change.id} ${change.name}${owned}\n`);
      }
      const count = (action: string) => changes.filter((change) => change.action === action).length;
      process.stdout.write(
        `${dryRun ? 'dry run: nothing written; ' : ''}${count('create')} to create, ${count('replace')} to replace, ${count('unchanged')} unchanged\n`,
      );
    });
    return exitCode.ok;
  },
};
