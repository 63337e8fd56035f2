import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Running } from './processes.js';
import { benchAuthorization } from './quotagate.js';
import { median } from './report.js';
import { Setups } from './setups.js';
import { ratioOf, runSideBySide } from './side-by-side.js';

/**
 * Two builds of quotagate side by side, both as shipped (basic auth, the two never-refusing
 * restrictions, the access log, memory store) in front of the same upstream, loaded at the same time
 * round after round: what a change costs per request, whatever else the machine does meanwhile. Run
 * `npm run build` in both checkouts first, then from this one:
 * `node dist/bench/two-builds.js --before ../other-checkout` (its `dist/cli.js`). `--after-first`
 * starts this build first, to see the position effect.
 */
const { values } = parseArgs({
  options: {
    before: { type: 'string' },
    rounds: { type: 'string', default: '15' },
    seconds: { type: 'string', default: '5' },
    'warmup-seconds': { type: 'string', default: '5' },
    connections: { type: 'string', default: '10' },
    'after-first': { type: 'boolean', default: false },
  },
});
if (!values.before) throw new Error('--before <a checkout with a build> is needed');
const beforeCli = path.resolve(values.before, 'dist/cli.js');
const say = (line: string) => process.stderr.write(`${line}\n`);
const wrk = (() => {
  try {
    return execFileSync('which', ['wrk'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
})();

const work = mkdtempSync(path.join(tmpdir(), 'quotagate-two-builds-'));
const started: Running[] = [];
const track = async <T extends Running>(what: Promise<T>): Promise<T> => {
  const done = await what;
  started.push(done);
  return done;
};

try {
  const setups = new Setups(work, track);
  const upstream = await setups.node('node upstream', 'node-upstream.js', [], false);
  const origin = new URL(upstream.url).origin;
  const shipped = { accessLog: true, quota: true } as const;
  const before = () =>
    setups.quotagate('before', 'before', origin, { type: 'memory' }, { ...shipped, cli: beforeCli });
  const after = () => setups.quotagate('after', 'after', origin, { type: 'memory' }, shipped);
  const targets = values['after-first']
    ? [await after(), await before()].reverse()
    : [await before(), await after()];
  const runs = await runSideBySide(targets, {
    wrk,
    rounds: Number(values.rounds),
    seconds: Number(values.seconds),
    warmupSeconds: Number(values['warmup-seconds']),
    connections: Number(values.connections),
    headers: { authorization: benchAuthorization },
    pinning: null,
    say,
  });
  const ratio = ratioOf(runs, 'after', 'before');
  process.stdout.write(
    `${JSON.stringify({
      beforeUs: median(runs.before!),
      afterUs: median(runs.after!),
      ratio: ratio.median,
      lowest: ratio.lowest,
      highest: ratio.highest,
      afterFirst: values['after-first'],
    })}\n`,
  );
} finally {
  for (const server of started.reverse()) await server.stop();
  rmSync(work, { recursive: true, force: true });
}
