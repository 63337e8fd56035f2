import { parseArgs } from 'node:util';
import { FocusedBench, say } from './focused-bench.js';
import { choosePinning } from './pinning.js';
import { benchAuthorization } from './quotagate.js';
import { headlineTable, noiseOf, type HeadlineRow } from './report.js';
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
const events = Math.max(4, Number(values.events));
const connections = Number(values.connections);
const pinning = choosePinning(values.pin);

const bench = new FocusedBench('stream');

async function main(): Promise<void> {
  const rows = await startStreamedRows(bench.setups, events);
  const others = bench.watchOthers();
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
  const outsideCores = others();
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
    bench.machineLine(outsideCores),
    '',
    headlineTable(headline, noiseOf(cost.control.ratio)),
    '',
    `${streamedText(cost, events, connections)} The four rows alone, loaded at the same time (each round starts their loads from another row), ${values.rounds} rounds of ${values.seconds} s after ${values['warmup-seconds']} s of warm-up${pinning ? `; the servers share core ${pinning.servers}, the loads and the upstream the other core(s)` : ''}; CPU: user + system time of each row's process tree (from /proc) over the round, divided by the events its load read. The noise heading the ratios is how far from 1 the control's median ratio to the header-only row may lie (the farther end of its 95% confidence interval).`,
    '',
  ].join('\n');
  bench.write('streams', { events, connections, pinning, outsideCores, headline, cost, runs }, markdown);
}

await bench.run(main);
