import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { FocusedBench, say } from './focused-bench.js';
import { choosePinning } from './pinning.js';
import { benchAuthorization } from './quotagate.js';
import { headlineTable, noiseOf, type HeadlineRow } from './report.js';
import type { Target } from './setups.js';
import { headlineRowOf, ratioOf, runSideBySide } from './side-by-side.js';

// Tracing's rows alone (`npm run bench:tracing`): quotagate as shipped with tracing off, sampled out
// and at several ratios, side by side with the undici floor and its control, without the other setups
// of bench/run.ts, so that each gets more of the machine and the differences between them stand out of
// the noise. `--baseline DIR` adds another build with tracing off (the build before tracing, say).
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '12' },
    seconds: { type: 'string', default: '5' },
    'warmup-seconds': { type: 'string', default: '30' },
    connections: { type: 'string', default: '10' },
    ratios: { type: 'string', default: '0.01,1' },
    baseline: { type: 'string' },
    pin: { type: 'boolean', default: false },
  },
});
const pinning = choosePinning(values.pin);
const ratios = values.ratios.split(',').map(Number);
if (ratios.some((ratio) => !(ratio > 0 && ratio <= 1)))
  throw new Error(`bench: --ratios takes ratios above 0 and at most 1, comma-separated: ${values.ratios}`);

const [nginx, wrk] = ['/usr/sbin/nginx', '/usr/bin/wrk'];
if (!existsSync(nginx) || !existsSync(wrk))
  throw new Error('bench: the tracing rows need nginx and wrk (apt-get install -y nginx-light wrk)');

const names = {
  floor: 'undici floor: http.createServer + undici Pool.stream',
  control: 'control: a second copy of the undici floor',
  off: 'quotagate as shipped, tracing off',
  baseline: `quotagate as shipped, baseline build (${values.baseline ?? ''})`,
  sampledOut: 'tracing on, every exchange sampled out (always_off)',
  ratio: (ratio: number) => `tracing on, ratio ${ratio}`,
};

const bench = new FocusedBench('tracing');

async function main(): Promise<void> {
  const { setups } = bench;
  const upstreamServer = await setups.nginx(
    nginx,
    'upstream',
    `    location / { default_type application/json; return 200 '{"ok":true}'; }`,
  );
  const upstream = `http://127.0.0.1:${upstreamServer.port}`;
  const sink = new URL((await setups.node('otlp sink', 'otlp-sink.js', [], false)).url).origin;
  const memory = { type: 'memory' };
  const shipped = { quota: true, accessLog: true } as const;
  const traced = (settings: Record<string, unknown>) => ({
    ...shipped,
    tracing: { enabled: true, endpoint: `${sink}/v1/traces`, ...settings },
  });
  const rows: Target[] = [
    await setups.node(names.floor, 'undici-floor.js', [upstream], false),
    await setups.node(names.control, 'undici-floor.js', [upstream], false),
    await setups.quotagate(names.off, 'off', upstream, memory, shipped),
    await setups.quotagate(
      names.sampledOut,
      'sampled-out',
      upstream,
      memory,
      traced({ sampler: 'always_off' }),
    ),
  ];
  if (values.baseline) {
    const cli = path.resolve(values.baseline, 'dist/cli.js');
    rows.push(await setups.quotagate(names.baseline, 'baseline', upstream, memory, { ...shipped, cli }));
  }
  // wrk sends no traceparent: the ratio alone decides which exchanges are sampled.
  for (const ratio of ratios)
    rows.push(
      await setups.quotagate(
        names.ratio(ratio),
        `ratio-${ratio}`,
        upstream,
        memory,
        traced({ sampleRatio: ratio }),
      ),
    );
  const others = bench.watchOthers();
  const runs = await runSideBySide(rows, {
    wrk,
    rounds: Number(values.rounds),
    seconds: Number(values.seconds),
    warmupSeconds: Number(values['warmup-seconds']),
    connections: Number(values.connections),
    headers: { authorization: benchAuthorization },
    pinning,
    say,
  });
  const outsideCores = others();
  const control = ratioOf(runs, names.control, names.floor);
  // Every tracing row and the baseline against the same build with tracing off; the rest against the floor.
  const headline: HeadlineRow[] = rows.map(({ name }) => {
    const againstOff = name !== names.floor && name !== names.control && name !== names.off;
    return headlineRowOf(runs, name, {
      reference: againstOff ? names.off : names.floor,
      shownAs: againstOff ? 'tracing off' : 'undici floor',
      vsBare: null,
    });
  });
  const exported = (await (await fetch(`${sink}/stats`)).json()) as { exports: number; spans: number };
  const markdown = [
    bench.machineLine(outsideCores),
    '',
    headlineTable(headline, noiseOf(control)),
    '',
    `Every row loaded at the same time, each by its own wrk (one thread, ${values.connections} connections; each round starts them from another row), ${values.rounds} rounds of ${values.seconds} s after ${values['warmup-seconds']} s of warm-up; CPU: user + system time of each row's process tree (from /proc) over the round, divided by the requests its wrk completed. Tracing exports to an OTLP sink that takes every export; it took ${exported.spans.toLocaleString('en-US')} spans in ${exported.exports.toLocaleString('en-US')} exports. The control, a second copy of the floor, came to ${control.median.toFixed(2)}× the floor (95% confidence interval ${control.medianLow.toFixed(2)}–${control.medianHigh.toFixed(2)}).`,
    '',
  ].join('\n');
  bench.write('tracing', { ratios, pinning, outsideCores, headline, exported, runs }, markdown);
}

await bench.run(main);
