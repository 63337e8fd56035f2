import { cpuSeconds } from './cpu-time.js';
import { runLoad, type LoadResult } from './load.js';
import { pinTree, type Pinning } from './pinning.js';
import { median } from './report.js';
import type { Target } from './setups.js';

export interface SideBySideOptions {
  wrk: string | null;
  rounds: number;
  seconds: number;
  warmupSeconds: number;
  connections: number;
  /** The headers of every request, but for a target that names its own. */
  headers: Record<string, string>;
  pinning: Pinning | null;
  say: (line: string) => void;
}

/** CPU µs per request of every setup in each round, by setup name. */
export type SideBySideRuns = Record<string, number[]>;

/**
 * Loads every target at the same time, each by its own wrk (one thread), for `rounds` rounds, and reads
 * each process tree's CPU time (user + system, from /proc) before and after every round. Whatever the
 * machine does meanwhile falls on every setup alike, so the ratio of two setups within a round is steady
 * where rounds one after another drift by ±10%; a control (a second copy of one setup) shows what is left
 * of that drift. With `pinning`, the servers share their core(s) and the
 * wrks theirs.
 */
export async function runSideBySide(
  targets: readonly Target[],
  options: SideBySideOptions,
): Promise<SideBySideRuns> {
  const { pinning, say } = options;
  if (pinning) for (const target of targets) pinTree(target.pid, pinning.servers);
  // The wrks start one after another: each round starts them from another setup, so that none is always
  // the first loaded or the last. The loads come back in the order of `targets`.
  const loadAll = async (seconds: number, first: number) => {
    const loads: LoadResult[] = [];
    await Promise.all(
      targets.map((_, k) => {
        const i = (first + k) % targets.length;
        const target = targets[i]!;
        return runLoad(options.wrk, {
          url: target.url,
          ...(target.protocol ? { protocol: target.protocol } : {}),
          connections: options.connections,
          seconds,
          headers: target.headers ?? options.headers,
          ...(pinning ? { cpus: pinning.load } : {}),
        }).then((load) => (loads[i] = load));
      }),
    );
    return loads;
  };
  say(`side by side: warming up ${targets.length} setups at once (${options.warmupSeconds} s)`);
  await loadAll(options.warmupSeconds, 0);
  const runs: SideBySideRuns = Object.fromEntries(targets.map((target) => [target.name, []]));
  for (let round = 1; round <= options.rounds; round += 1) {
    say(
      `side by side: round ${round}/${options.rounds}, ${targets.length} setups at once (${options.seconds} s)`,
    );
    const before = targets.map((target) => cpuSeconds(target.pid));
    const loads = await loadAll(options.seconds, round % targets.length);
    targets.forEach((target, i) => {
      const load = loads[i]!;
      if (load.non2xx > 0) throw new Error(`${target.name}: ${load.non2xx} responses were not 2xx`);
      const [from, to] = [before[i] ?? null, cpuSeconds(target.pid)];
      const cpuUs = from === null || to === null ? NaN : ((to - from) * 1e6) / Math.max(1, load.requests);
      runs[target.name]!.push(cpuUs);
    });
  }
  return runs;
}

/** A setup's CPU per request against another's in the same rounds: the median ratio, and its range. */
export interface Ratio {
  median: number;
  lowest: number;
  highest: number;
}

export function ratioOf(runs: SideBySideRuns, name: string, reference: string): Ratio {
  const ratios = runs[name]!.map((cpuUs, round) => cpuUs / runs[reference]![round]!);
  return { median: median(ratios), lowest: Math.min(...ratios), highest: Math.max(...ratios) };
}

/** What a setup adds to the one below it, round by round: the median difference in µs per request. */
export function addedOver(runs: SideBySideRuns, name: string, below: string): number {
  return median(runs[name]!.map((cpuUs, round) => cpuUs - runs[below]![round]!));
}
