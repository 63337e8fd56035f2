import { parseArgs, type ParseArgsConfig } from 'node:util';

export { exitCode } from '../kit/exit-codes.js';

export interface Command {
  summary: string;
  help: string;
  run(argv: string[]): Promise<number>;
}

export class UsageError extends Error {}

/** Strict option parsing: an unknown option or a missing value is a UsageError. */
export function parseOptions<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  allowPositionals = false,
) {
  try {
    return parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals,
      strict: true,
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}
