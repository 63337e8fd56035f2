import { parseArgs, type ParseArgsConfig } from 'node:util';
import { didYouMean } from '../kit/key-suggestions.js';

export { exitCode } from '../kit/exit-codes.js';

export interface Command {
  summary: string;
  help: string;
  run(argv: string[]): Promise<number>;
}

export class UsageError extends Error {}

/**
 * Strict option parsing: an unknown option or a missing value is a UsageError; an unknown option names
 * the known one it most likely misspells.
 */
export function parseOptions<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  allowPositionals = false,
) {
  const all = { ...options, help: { type: 'boolean', short: 'h' } } as const;
  try {
    return parseArgs({ args: argv, options: all, allowPositionals, strict: true });
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    const unknown = code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /'(--[^']+)'/.exec(message)?.[1] : undefined;
    if (unknown === undefined) throw new UsageError(message);
    const meant = didYouMean(
      unknown,
      Object.keys(all).map((name) => `--${name}`),
    );
    throw new UsageError(message.replace(`'${unknown}'`, `'${unknown}'${meant}`));
  }
}

/**
 * The action and the FILE of a command of the form `export | import [FILE]`: nothing after FILE.
 * @throws UsageError for another action, or more arguments
 */
export function exportOrImport(positionals: readonly string[]): {
  action: 'export' | 'import';
  file: string | undefined;
} {
  const [action, file, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
  if (action !== 'export' && action !== 'import') throw new UsageError('say export or import (see --help)');
  return { action, file };
}
