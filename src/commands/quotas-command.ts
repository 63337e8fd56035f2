import { existsSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { ApplicationDirectory } from '../applications/application-directory.js';
import type { ApplicationRepository } from '../applications/application-repository.js';
import {
  exportedApplications,
  planApplications,
  writeQuotasThenApplications,
  type ApplicationChange,
} from '../applications/application-transfer.js';
import {
  ApplicationStoreCorrupt,
  FileApplicationRepository,
} from '../applications/file-application-repository.js';
import { applicationsFileOf } from '../stores/open-application-repository.js';
import { ConfigError } from '../kit/config-error.js';
import { loadConfig, type LoadedConfig } from '../config/load-config.js';
import { LogSecrets, type Logger } from '../observe/log.js';
import { declarationsOf, planQuotas, type QuotaChange } from '../quota/declared-quotas.js';
import { FileQuotaRepository } from '../quota/file-quota-repository.js';
import { QuotaStoreCorrupt, type QuotaRepository } from '../quota/quota-repository.js';
import { storeFileOwner } from '../quota/store-owner.js';
import { fieldPath } from '../quota/schema-problems.js';
import { Closers } from '../runtime/closers.js';
import { openStores } from '../runtime/open-stores.js';
import { secretValues } from '../kit/secret-redaction.js';
import { commandLogger } from './command-log.js';
import { exitCode, exportOrImport, parseOptions, UsageError, type Command } from './command.js';
import { readImportFile } from './import-file.js';

/** Everything a store holds, as a file declares it: what export writes and import reads. */
interface StoreContent {
  quotas: Array<Record<string, unknown>>;
  applications: ReturnType<typeof exportedApplications>;
}

/**
 * Opens the stores of the config as a gateway does (the quotas, and the applications made through the
 * admin API, which quotas may belong to), for one command, and closes them after.
 */
async function withStore<T>(
  loaded: LoadedConfig,
  logger: Logger,
  use: (repository: QuotaRepository, applications: ApplicationRepository) => Promise<T>,
): Promise<T> {
  const closers = new Closers(logger);
  try {
    const { owned } = await openStores(loaded, { kind: 'command' }, { logger, cwd: process.cwd() }, closers);
    return await use(owned!.quotas, owned!.applications);
  } finally {
    await closers.close();
  }
}

/**
 * What a memory store's files hold: the quotas of `file` (`store.file`) and the applications of
 * `applicationsFile` (none when that file is absent).
 */
async function fromStoreFiles(file: string, applicationsFile: string, logger: Logger): Promise<StoreContent> {
  if (!existsSync(file)) throw new UsageError(`--from-file: ${file} does not exist`);
  const quotas = new FileQuotaRepository(file, logger);
  const applications = new FileApplicationRepository(applicationsFile, logger);
  try {
    await quotas.open();
    await applications.open();
  } catch (error) {
    if (error instanceof QuotaStoreCorrupt || error instanceof ApplicationStoreCorrupt)
      throw new ConfigError([error.message]);
    throw error;
  } finally {
    await Promise.all([quotas.close(), applications.close()]);
  }
  return { quotas: declarationsOf(quotas.all()), applications: exportedApplications(applications.all()) };
}

/** The lines of an import's report: each change, then how many of each (`what`: "" for quotas). */
function reportLines(
  changes: ReadonlyArray<QuotaChange | ApplicationChange>,
  dryRun: boolean,
  what: string,
): string[] {
  const verb = {
    create: dryRun ? 'would create' : 'created',
    replace: dryRun ? 'would replace' : 'replaced',
    unchanged: 'unchanged',
  };
  const lines = changes.map((change) => {
    const owned = 'application' in change && change.application ? ` (application ${change.application})` : '';
    return `${verb[change.action]} ${what}${change.id} ${change.name}${owned}`;
  });
  const count = (action: string) => changes.filter((change) => change.action === action).length;
  const kind = what === '' ? '' : `${what.trim()}s `;
  lines.push(
    `${dryRun ? 'dry run: nothing written; ' : ''}${count('create')} ${kind}to create, ${count('replace')} to replace, ${count('unchanged')} unchanged`,
  );
  return lines;
}

export const quotasCommand: Command = {
  summary: 'export the quotas and applications of the store, or import them from a file',
  help: `Usage: gateway quotas export [--config-dir DIR] [--format yaml|json] [--from-file FILE [--applications-file FILE]]
       gateway quotas import FILE [--config-dir DIR] [--dry-run]

export   writes everything the config's store holds (the memory store's files, or Redis) to standard
         output: a \`quotas\` list (the QuotaDTO of each, with its id and, for an application's own
         quota, its application; an application on a plan as its record's id, application and plan),
         and an \`applications\` list of the applications made through the admin API as stored (their
         keys as SHA-256 digests, never a key). The quotas are what \`quotas\` in conf/ reads; the whole
         is what \`import\` reads. With --from-file, from that memory store's file instead (to move to
         Redis; no config is read), and the applications from --applications-file (default:
         applications.json beside it).
import   reads FILE (YAML or JSON: what export wrote, or a list of quotas alone), checks everything
         against the catalog and the applications of the config (all mistakes at once), and writes what is
         new or changed into the store; quotas and applications the file does not name are left alone.
         The quotas are written all or none, in one write, then the applications likewise. An
         application that has another quota of its own is a mistake, not an overwrite. With Redis the
         running gateways see the change within a second; the memory store's files belong to its running
         gateway (it marks them so), so import refuses while that gateway runs.
--dry-run  prints what import would do, and writes nothing.

Standard output holds only the export, or the report; warnings go to standard error.
Exit codes: 0 done, 1 the store cannot be reached or written, 2 bad usage or a file with mistakes.`,
  async run(argv) {
    const { values, positionals } = parseOptions(
      argv,
      {
        'config-dir': { type: 'string', default: 'conf' },
        format: { type: 'string', default: 'yaml' },
        'dry-run': { type: 'boolean', default: false },
        'from-file': { type: 'string' },
        'applications-file': { type: 'string' },
      },
      true,
    );
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    const { action, file } = exportOrImport(positionals);
    if (values.format !== 'yaml' && values.format !== 'json')
      throw new UsageError('--format must be yaml or json');
    const fromFile = values['from-file'];
    const applicationsFile = values['applications-file'];
    if (applicationsFile !== undefined && (action !== 'export' || !fromFile))
      throw new UsageError('--applications-file goes with export --from-file');
    const write = ({ quotas, applications }: StoreContent) => {
      const content = applications.length > 0 ? { quotas, applications } : { quotas };
      process.stdout.write(
        values.format === 'json' ? `${JSON.stringify(content, null, 2)}\n` : YAML.stringify(content),
      );
    };
    if (action === 'export' && fromFile) {
      // A memory store's files alone: no config is read, so none (keys, users) needs to be complete.
      const quotaFile = path.resolve(fromFile);
      if (applicationsFile !== undefined && !existsSync(applicationsFile))
        throw new UsageError(`--applications-file: ${applicationsFile} does not exist`);
      write(
        await fromStoreFiles(
          quotaFile,
          applicationsFile === undefined
            ? applicationsFileOf({ file: quotaFile }, process.cwd())
            : path.resolve(applicationsFile),
          commandLogger('quotas'),
        ),
      );
      return exitCode.ok;
    }
    const loaded = await loadConfig({ configDir: values['config-dir'] });
    const logger = commandLogger(
      'quotas',
      new LogSecrets(secretValues({ ...loaded.extras, ...loaded.config })),
    );

    if (action === 'export') {
      write(
        await withStore(loaded, logger, async (repository, applications) => ({
          quotas: declarationsOf(repository.all()),
          applications: exportedApplications(applications.all()),
        })),
      );
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
    await withStore(loaded, logger, async (repository, applications) => {
      const made = new ApplicationDirectory();
      made.follow(applications);
      const wanted = readImportFile(file, loaded.config, made);
      const quotas = planQuotas(repository, wanted.quotas);
      const moved =
        wanted.applications &&
        planApplications(applications.all(), wanted.applications, loaded.config.applications, 'applications');
      const problems = [
        ...quotas.problems,
        ...(moved?.problems ?? []).map(
          ({ path, message }) => `${fieldPath(['applications', ...path])}: ${message}`,
        ),
      ];
      if (problems.length > 0) throw new ConfigError(problems.map((problem) => `${file}: ${problem}`));
      if (!dryRun)
        await writeQuotasThenApplications(
          { quotas: repository, applications },
          quotas.writes,
          moved?.writes ?? [],
        );
      const lines = [
        ...reportLines(quotas.changes, dryRun, ''),
        ...(moved ? reportLines(moved.changes, dryRun, 'application ') : []),
      ];
      process.stdout.write(`${lines.join('\n')}\n`);
    });
    return exitCode.ok;
  },
};
