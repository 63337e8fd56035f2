import { parseArgs, type ParseArgsConfig } from 'node:util';

/** Exit codes of every command: 0 ok, 1 runtime failure, 2 bad usage or bad config. */
export const exitCode = { ok: 0, failure: 1, usage: 2 } as const;

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
