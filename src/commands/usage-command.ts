import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../kit/config-error.js';
import { loadConfig } from '../config/load-config.js';
import { LogSecrets } from '../observe/log.js';
import { FileUsageHistory } from '../quota/file-usage-history.js';
import {
  countNames,
  isDate,
  rangeProblems,
  type UsageHistoryStore,
  type UsageRow,
} from '../quota/usage-history.js';
import { Closers } from '../runtime/closers.js';
import { openStores } from '../runtime/open-stores.js';
import { secretValues } from '../kit/secret-redaction.js';
import { commandLogger } from './command-log.js';
import { exitCode, exportOrImport, parseOptions, UsageError, type Command } from './command.js';

const csvColumns = ['date', 'application', 'api', 'method', ...countNames] as const;

/** A CSV cell (RFC 4180): quoted when it holds a comma, a quote or a line break. */
const cell = (value: string | number | null): string => {
  const text = value === null ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
};

const csvOf = (rows: readonly UsageRow[]): string =>
  [csvColumns.join(','), ...rows.map((row) => csvColumns.map((column) => cell(row[column])).join(','))]
    .map((line) => `${line}\n`)
    .join('');

/** The lines of an import file (what export --format json wrote), or the problems of each line. */
function rowsOfFile(file: string): UsageRow[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError([`${file}: ${(error as Error).message}`]);
  }
  if (!Array.isArray(parsed))
    throw new ConfigError([`${file}: not a JSON array of lines (export --format json)`]);
  const problems: string[] = [];
  parsed.forEach((value, index) => {
    const row = value as Partial<UsageRow> | null;
    const fine =
      typeof row === 'object' &&
      row !== null &&
      typeof row.date === 'string' &&
      isDate(row.date) &&
      typeof row.api === 'string' &&
      (row.application === null || typeof row.application === 'string') &&
      (row.method === null || typeof row.method === 'string') &&
      countNames.every((name) => Number.isSafeInteger(row[name]) && row[name]! >= 0);
    if (!fine) problems.push(`${file}: [${index}]: not a line of the usage history`);
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return parsed as UsageRow[];
}

export const usageCommand: Command = {
  summary: 'export the usage history of the store (per application, API, method and day), or import it',
  help: `Usage: gateway usage export --from YYYY-MM-DD --to YYYY-MM-DD [--format csv|json] [--api ID] [--config-dir DIR] [--from-file FILE]
       gateway usage import FILE [--config-dir DIR]

export   writes the lines of the usage history from --from to --to (both included, days of
         usageHistory.timeZone) to standard output: the same lines as the admin API's
         GET /api/portal/v1.3/usage/history, as CSV (the default, a header line first) or a JSON array.
         With --from-file, from that memory store's history file (data/usage-history.json) instead.
import   adds the lines of FILE (what export --format json wrote) to the store's history: how history
         moves from a memory store to Redis. Import a file once: its counts are added, not set.

Exit codes: 0 done, 1 the store cannot be reached or written, 2 bad usage or a file with mistakes.`,
  async run(argv) {
    const { values, positionals } = parseOptions(
      argv,
      {
        'config-dir': { type: 'string', default: 'conf' },
        format: { type: 'string', default: 'csv' },
        from: { type: 'string' },
        to: { type: 'string' },
        api: { type: 'string' },
        'from-file': { type: 'string' },
      },
      true,
    );
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    const { action, file } = exportOrImport(positionals);
    if (action === 'import' && file === undefined) throw new UsageError('import needs the FILE to read');
    if (action === 'export' && file !== undefined) throw new UsageError(`unexpected argument: ${file}`);
    if (values.format !== 'csv' && values.format !== 'json')
      throw new UsageError('--format must be csv or json');
    const { from, to } = values;
    if (action === 'export' && (from === undefined || to === undefined))
      throw new UsageError('export needs --from and --to (YYYY-MM-DD)');
    const write = (rows: readonly UsageRow[]) =>
      process.stdout.write(values.format === 'json' ? `${JSON.stringify(rows, null, 2)}\n` : csvOf(rows));
    const fromFile = values['from-file'];
    if (action === 'export' && fromFile !== undefined) {
      if (!existsSync(fromFile)) throw new UsageError(`--from-file: ${fromFile} does not exist`);
      const problems = rangeProblems(from!, to!, Number.MAX_SAFE_INTEGER);
      if (problems.length > 0) throw new UsageError(problems.join('; '));
      const history = new FileUsageHistory(path.resolve(fromFile), Number.MAX_SAFE_INTEGER);
      await history.open().catch((error: Error) => {
        throw new ConfigError([error.message]);
      });
      write(await history.read({ from: from!, to: to!, ...(values.api ? { api: values.api } : {}) }));
      return exitCode.ok;
    }
    const loaded = await loadConfig({ configDir: values['config-dir'] });
    const logger = commandLogger(
      'usage',
      new LogSecrets(secretValues({ ...loaded.extras, ...loaded.config })),
    );
    const closers = new Closers(logger);
    try {
      const stores = await openStores(loaded, { kind: 'command' }, { logger, cwd: process.cwd() }, closers);
      const history: UsageHistoryStore = stores.usageHistory!;
      if (action === 'import') {
        const rows = rowsOfFile(file!);
        await history.add(rows);
        process.stdout.write(`added ${rows.length} lines to the usage history\n`);
        return exitCode.ok;
      }
      const problems = rangeProblems(from!, to!, loaded.config.usageHistory.days);
      if (problems.length > 0) throw new UsageError(problems.join('; '));
      write(await history.read({ from: from!, to: to!, ...(values.api ? { api: values.api } : {}) }));
      return exitCode.ok;
    } finally {
      await closers.close();
    }
  },
};
