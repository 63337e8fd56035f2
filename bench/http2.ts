import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { choosePinning } from './pinning.js';
import { type Running } from './processes.js';
import { benchAuthorization } from './quotagate.js';
import { median } from './report.js';
import { Setups, type Target } from './setups.js';
import { ratioOf, runSideBySide } from './side-by-side.js';

/**
 * What HTTP/2 costs (issue 32): quotagate over h2c against a bare Node http2 proxy (node:http2 → undici,
 * `bench/servers/bare-http2-proxy.ts`), with quotagate and bare http-proxy-3 over HTTP/1.1 beside them,
 * all loaded at the same time (h2load for HTTP/2, wrk for HTTP/1.1, one stream or request in flight per
 * connection), CPU per request read from /proc as the headline of `npm run bench` reads it.
 */
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '10' },
    seconds: { type: 'string', default: '5' },
    'warmup-seconds': { type: 'string', default: '5' },
    connections: { type: 'string', default: '10' },
    pin: { type: 'boolean', default: false },
  },
});

const say = (line: string) => process.stderr.write(`${line}\n`);
const installed = (name: string) => {
  try {
    execFileSync('which', [name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
if (!installed('h2load')) throw new Error('h2load (nghttp2-client) is needed to load over HTTP/2');
const wrk = installed('wrk') ? 'wrk' : null;

const names = {
  bareHttp2: 'bare Node http2 proxy (h2c)',
  quotagateHttp2: 'quotagate as shipped (h2c)',
  bareHttp1: 'bare http-proxy-3 (HTTP/1.1)',
  quotagateHttp1: 'quotagate as shipped (HTTP/1.1)',
} as const;

const work = mkdtempSync(path.join(tmpdir(), 'quotagate-bench-http2-'));
const running: Running[] = [];
const track = async <T extends Running>(what: Promise<T>): Promise<T> => {
  const started = await what;
  running.push(started);
  return started;
};

async function main(): Promise<void> {
  const setups = new Setups(work, track);
  const upstreamTarget = await setups.node('node upstream', 'node-upstream.js', [], false);
  const upstream = new URL(upstreamTarget.url).origin;
  const memory = { type: 'memory' };
  const layers = { quota: true, accessLog: true };
  const quotagate = await setups.quotagate(names.quotagateHttp1, 'quotagate', upstream, memory, layers);
  const targets: Target[] = [
    { ...(await setups.node(names.bareHttp2, 'bare-http2-proxy.js', [upstream], false)), http2: true },
    // The same gateway process answers both protocols: each is loaded by its own generator.
    { ...quotagate, name: names.quotagateHttp2, http2: true },
    await setups.node(names.bareHttp1, 'bare-proxy.js', [upstream], false),
  ];
  const rounds = Number(values.rounds);
  const options = {
    wrk,
    rounds,
    seconds: Number(values.seconds),
    warmupSeconds: Number(values['warmup-seconds']),
    connections: Number(values.connections),
    headers: { authorization: benchAuthorization },
    pinning: choosePinning(values.pin),
    say,
  };
  // quotagate is loaded over one protocol at a time: its process tree's CPU is then that protocol's.
  const overHttp2 = await runSideBySide(targets, options);
  const overHttp1 = await runSideBySide([{ ...quotagate }, targets[2]!], options);
  const row = (
    name: string,
    cpuUs: number[],
    against: string,
    ratio: { median: number; lowest: number; highest: number },
  ) =>
    `| ${name} | ${median(cpuUs).toFixed(1)} | ${ratio.median.toFixed(2)}× (${ratio.lowest.toFixed(2)}–${ratio.highest.toFixed(2)}) vs ${against} |`;
  const lines = [
    `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), Node ${process.version}; ${rounds} rounds of ${values.seconds} s, ${values.connections} connections, one stream or request in flight on each.`,
    '',
    '| Setup | CPU µs/req | CPU against |',
    '|---|---:|---|',
    row(
      names.bareHttp2,
      overHttp2[names.bareHttp2]!,
      names.bareHttp2,
      ratioOf(overHttp2, names.bareHttp2, names.bareHttp2),
    ),
    row(
      names.quotagateHttp2,
      overHttp2[names.quotagateHttp2]!,
      names.bareHttp2,
      ratioOf(overHttp2, names.quotagateHttp2, names.bareHttp2),
    ),
    row(
      names.bareHttp1,
      overHttp1[names.bareHttp1]!,
      names.bareHttp1,
      ratioOf(overHttp1, names.bareHttp1, names.bareHttp1),
    ),
    row(
      names.quotagateHttp1,
      overHttp1[names.quotagateHttp1]!,
      names.bareHttp1,
      ratioOf(overHttp1, names.quotagateHttp1, names.bareHttp1),
    ),
  ];
  process.stdout.write(`\n${lines.join('\n')}\n`);
}

async function stopAll(): Promise<void> {
  for (const child of running.splice(0).reverse()) await child.stop();
  rmSync(work, { recursive: true, force: true });
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    say(`${signal}: stopping the bench servers`);
    void stopAll().finally(() => process.exit(130));
  });
}

try {
  await main();
} finally {
  await stopAll();
}
