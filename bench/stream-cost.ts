import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { cpuSeconds, machineCpuSeconds } from './cpu-time.js';
import { choosePinning } from './pinning.js';
import { runThenStop, type Running } from './processes.js';
import { benchAuthorization } from './quotagate.js';
import { headlineTable, noiseOf, type HeadlineRow } from './report.js';
import { Setups } from './setups.js';
import { headlineRowOf, runSideBySide } from './side-by-side.js';
import {
  checkStreamedCharges,
  startStreamedRows,
  streamedCost,
  streamedLayerBelow,
  streamedNames,
  streamedText,
} from './streamed-rows.js';

// The streamed rows alone (`npm run bench:streams`): the four of them side by side, without the other
// setups of bench/run.ts, so that each gets more of the machine and a round counts more events.
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '10' },
    seconds: { type: 'string', default: '5' },
    'warmup-seconds': { type: 'string', default: '5' },
    connections: { type: 'string', default: '10' },
    events: { type: 'string', default: '100' },
    pin: { type: 'boolean', default: false },
  },
});
const say = (line: string) => process.stderr.write(`${line}\n`);
const events = Math.max(4, Number(values.events));
const connections = Number(values.connections);
const pinning = choosePinning(values.pin);

const work = mkdtempSync(path.join(tmpdir(), 'quotagate-stream-bench-'));
const running: Running[] = [];
const track = async <T extends Running>(what: Promise<T>): Promise<T> => {
  const started = await what;
  running.push(started);
  return started;
};

async function main(): Promise<void> {
  const rows = await startStreamedRows(new Setups(work, track), events);
  // CPU time spent on the machine outside this bench's process tree while it measures: other tenants.
  const outside = () => (machineCpuSeconds() ?? NaN) - (cpuSeconds(process.pid) ?? NaN);
  const from = { cpu: outside(), wall: performance.now() };
  const runs = await runSideBySide(rows, {
    wrk: null,
    rounds: Number(values.rounds),
    seconds: Number(values.seconds),
    warmupSeconds: Number(values['warmup-seconds']),
    connections,
    headers: { authorization: benchAuthorization },
    pinning,
    say,
  });
  const outsideCores = (outside() - from.cpu) / ((performance.now() - from.wall) / 1000);
  await checkStreamedCharges(rows, events);
  const bare = streamedNames.bare;
  const headline: HeadlineRow[] = rows.map(({ name }) =>
    headlineRowOf(runs, name, {
      reference: bare,
      shownAs: 'http-proxy-3, streamed',
      ...(streamedLayerBelow[name] ? { below: streamedLayerBelow[name] } : {}),
      vsBare: null,
    }),
  );
  const cost = streamedCost(runs);
  const markdown = [
    `Machine: ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown'}), Node ${process.version}. Other processes on the machine used ${outsideCores.toFixed(2)} cores on average while the bench measured.`,
    '',
    headlineTable(headline, noiseOf(cost.control.ratio)),
    '',
    `${streamedText(cost, events, connections)} The four rows alone, loaded at the same time (each round starts their loads from another row), ${values.rounds} rounds of ${values.seconds} s after ${values['warmup-seconds']} s of warm-up${pinning ? `; the servers share core ${pinning.servers}, the loads and the upstream the other core(s)` : ''}; CPU: user + system time of each row's process tree (from /proc) over the round, divided by the events its load read. The noise heading the ratios is how far from 1 the control's median ratio to the header-only row may lie (the farther end of its 95% confidence interval).`,
    '',
  ].join('\n');
  const resultsDir = path.resolve('bench/results');
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(
    path.join(resultsDir, 'streams.json'),
    `${JSON.stringify({ events, connections, pinning, outsideCores, headline, cost, runs }, null, 2)}\n`,
  );
  writeFileSync(path.join(resultsDir, 'streams.md'), markdown);
  process.stdout.write(`\n${markdown}\n`);
  say('written: bench/results/streams.json, streams.md');
}

async function stopAll(): Promise<void> {
  for (const child of running.splice(0).reverse()) await child.stop();
  rmSync(work, { recursive: true, force: true });
}

await runThenStop(main, stopAll, say);
