import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

export interface LoadResult {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
}

/**
 * What a target speaks: HTTP/1.1 (wrk), HTTP/2 with prior knowledge (h2load), WebSocket messages, or
 * streamed chat completions (`text/event-stream` answers, counted by the event).
 */
export type LoadProtocol = 'http1' | 'h2' | 'ws' | 'event-stream';

export interface LoadOptions {
  url: string;
  /** HTTP/1.1 when absent. */
  protocol?: LoadProtocol;
  connections: number;
  seconds: number;
  headers: Record<string, string>;
  /** Cores wrk runs on (a taskset list); anywhere when absent. */
  cpus?: string;
}

const toMs = (value: string, unit: string) =>
  Number(value) * ({ us: 0.001, ms: 1, s: 1000, m: 60_000 } as Record<string, number>)[unit]!;

/** The command line of a load generator, on `cpus` when given. */
const pinned = (binary: string, args: string[], cpus?: string): [string, string[]] =>
  cpus ? ['taskset', ['-c', cpus, binary, ...args]] : [binary, args];

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
  const [command, commandArgs] = pinned(binary, args, options.cpus);
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

/**
 * Load with h2load (Debian's nghttp2-client): one thread, one stream at a time per connection, as wrk
 * sends one request at a time per connection. No latency percentiles: h2load reports only the mean.
 */
async function h2load(options: LoadOptions): Promise<LoadResult> {
  const headers = Object.entries(options.headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]);
  const args = ['-t1', `-c${options.connections}`, '-m1', `-D${options.seconds}`, ...headers, options.url];
  const [command, commandArgs] = pinned('h2load', args, options.cpus);
  const { stdout } = await promisify(execFile)(command, commandArgs, {
    timeout: (options.seconds + 30) * 1000,
  });
  const done = Number(/requests: \d+ total, \d+ started, (\d+) done/.exec(stdout)?.[1] ?? 0);
  const succeeded = Number(/status codes: (\d+) 2xx/.exec(stdout)?.[1] ?? 0);
  return {
    rps: Number(/finished in [\d.]+s, ([\d.]+) req\/s/.exec(stdout)?.[1] ?? 0),
    p50Ms: NaN,
    p99Ms: NaN,
    requests: done,
    non2xx: done - succeeded,
  };
}

/** Runs one of bench/servers/*-load.js in its own process against `options`, and parses what it prints. */
async function nodeLoad<T>(script: string, options: LoadOptions): Promise<T> {
  const args = [
    `dist/bench/servers/${script}`,
    options.url,
    String(options.connections),
    String(options.seconds),
    JSON.stringify(options.headers),
  ];
  const [command, commandArgs] = pinned(process.execPath, args, options.cpus);
  const { stdout } = await promisify(execFile)(command, commandArgs, {
    timeout: (options.seconds + 30) * 1000,
  });
  return JSON.parse(stdout) as T;
}

/** Load of WebSocket messages (bench/servers/ws-load.js); a request is one echo. */
async function websocketLoad(options: LoadOptions): Promise<LoadResult> {
  const { echoed, failed } = await nodeLoad<{ echoed: number; failed: number }>('ws-load.js', options);
  return { rps: echoed / options.seconds, p50Ms: NaN, p99Ms: NaN, requests: echoed, non2xx: failed };
}

/**
 * Load of streamed answers (bench/servers/chat-stream-load.js); a request is one event (the answers are
 * all of the same length, so CPU per event is CPU per answer over its events).
 */
async function eventStreamLoad(options: LoadOptions): Promise<LoadResult> {
  const { events, failed } = await nodeLoad<{ events: number; failed: number }>(
    'chat-stream-load.js',
    options,
  );
  return { rps: events / options.seconds, p50Ms: NaN, p99Ms: NaN, requests: events, non2xx: failed };
}

/** Runs one load: by its protocol; for HTTP/1.1, wrk when `wrkBinary` is given, else autocannon. */
export function runLoad(wrkBinary: string | null, options: LoadOptions): Promise<LoadResult> {
  if (options.protocol === 'h2') return h2load(options);
  if (options.protocol === 'ws') return websocketLoad(options);
  if (options.protocol === 'event-stream') return eventStreamLoad(options);
  return wrkBinary ? wrk(wrkBinary, options) : autocannon(options);
}
