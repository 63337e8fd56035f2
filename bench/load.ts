import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

export interface LoadResult {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
}

export interface LoadOptions {
  url: string;
  connections: number;
  seconds: number;
  headers: Record<string, string>;
  /** Cores wrk runs on (a taskset list); anywhere when absent. */
  cpus?: string;
  /** HTTP/2 with prior knowledge, by h2load (one stream at a time per connection, as wrk's). */
  http2?: boolean;
}

const toMs = (value: string, unit: string) =>
  Number(value) * ({ us: 0.001, ms: 1, s: 1000, m: 60_000 } as Record<string, number>)[unit]!;

/** Load with wrk: one thread (the machine has two cores, and the servers need one). */
async function wrk(binary: string, options: LoadOptions): Promise<LoadResult> {
  const headers = Object.entries(options.headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]);
  const args = [
    '-t1',
    `-c${options.connections}`,
    `-d${options.seconds}s`,
    '--latency',
    ...headers,
    options.url,
  ];
  const [command, commandArgs] = options.cpus
    ? ['taskset', ['-c', options.cpus, binary, ...args]]
    : [binary, args];
  const { stdout } = await promisify(execFile)(command, commandArgs, {
    timeout: (options.seconds + 30) * 1000,
  });
  const latency = (percentile: string) => {
    const match = new RegExp(`^\\s*${percentile}%\\s+([\\d.]+)(us|ms|s|m)`, 'm').exec(stdout);
    return match ? toMs(match[1]!, match[2]!) : NaN;
  };
  const requests = Number(/(\d+) requests in/.exec(stdout)?.[1] ?? 0);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? 0),
    p50Ms: latency('50'),
    p99Ms: latency('99'),
    requests,
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0),
  };
}

/** Load over h2c with nghttp2's h2load: `connections` clients, one stream in flight on each. */
async function h2load(options: LoadOptions): Promise<LoadResult> {
  const headers = Object.entries(options.headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]);
  const args = [
    '-c',
    String(options.connections),
    '-m',
    '1',
    '-D',
    String(options.seconds),
    ...headers,
    options.url,
  ];
  const [command, commandArgs] = options.cpus
    ? ['taskset', ['-c', options.cpus, 'h2load', ...args]]
    : ['h2load', args];
  const { stdout } = await promisify(execFile)(command, commandArgs, {
    timeout: (options.seconds + 30) * 1000,
  });
  const succeeded = Number(/(\d+) succeeded/.exec(stdout)?.[1] ?? 0);
  const statuses = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(stdout);
  const meanMs = /time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)/.exec(stdout);
  return {
    rps: Number(/finished in [\d.]+s, ([\d.]+) req\/s/.exec(stdout)?.[1] ?? 0),
    // h2load reports a mean, not percentiles: both read it.
    p50Ms: meanMs ? toMs(meanMs[1]!, meanMs[2]!) : NaN,
    p99Ms: NaN,
    requests: succeeded,
    non2xx: statuses ? Number(statuses[2]) + Number(statuses[3]) + Number(statuses[4]) : 0,
  };
}

/** Load with autocannon, when wrk is not installed. */
async function autocannon(options: LoadOptions): Promise<LoadResult> {
  const { default: run } = await import('autocannon');
  const result = await run({
    url: options.url,
    connections: options.connections,
    duration: options.seconds,
    headers: options.headers,
  });
  return {
    rps: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
  };
}

/** Runs one load: h2load for HTTP/2; else wrk when `wrkBinary` is given, else autocannon. */
export function runLoad(wrkBinary: string | null, options: LoadOptions): Promise<LoadResult> {
  if (options.http2) return h2load(options);
  return wrkBinary ? wrk(wrkBinary, options) : autocannon(options);
}
