import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { OpenLoopResult } from './open-loop.js';

export type { OpenLoopResult } from './open-loop.js';

export interface FixedRateOptions {
  url: string;
  /** Requests per second, sent on schedule whether or not earlier ones were answered. */
  rate: number;
  /** Recorded seconds, after `warmupSeconds` of the same load that is not recorded. */
  seconds: number;
  warmupSeconds: number;
  headers: Record<string, string>;
}

const generator = fileURLToPath(new URL('./open-loop.js', import.meta.url));

/** Runs the open-loop generator (bench/open-loop.ts) in its own process, and reads its JSON line. */
export async function runFixedRate(options: FixedRateOptions): Promise<OpenLoopResult> {
  const headers = Object.entries(options.headers).flatMap(([name, value]) => [
    '--header',
    `${name}: ${value}`,
  ]);
  const args = [
    generator,
    '--url',
    options.url,
    '--rate',
    String(options.rate),
    '--seconds',
    String(options.seconds),
    '--warmup-seconds',
    String(options.warmupSeconds),
    ...headers,
  ];
  const { stdout } = await promisify(execFile)(process.execPath, args, {
    timeout: (options.warmupSeconds + options.seconds + 30) * 1000,
  });
  return JSON.parse(stdout) as OpenLoopResult;
}
