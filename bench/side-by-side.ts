import { cpuSeconds } from './cpu-time.js';
import { runLoad, type LoadResult } from './load.js';
import { pinTree, type Pinning } from './pinning.js';
import { median, type HeadlineRow } from './report.js';
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

/**
 * A setup's CPU per request against another's in the same rounds: the median ratio, its range, and a
 * 95% confidence interval of the median (`medianLow`–`medianHigh`).
 */
export interface Ratio {
  median: number;
  lowest: number;
  highest: number;
  medianLow: number;
  medianHigh: number;
}

export function ratioOf(runs: SideBySideRuns, name: string, reference: string): Ratio {
  const ratios = runs[name]!.map((cpuUs, round) => cpuUs / runs[reference]![round]!);
  const sorted = [...ratios].sort((a, b) => a - b);
  const rank = medianConfidenceRank(sorted.length);
  return {
    median: median(ratios),
    lowest: sorted[0]!,
    highest: sorted.at(-1)!,
    medianLow: sorted[rank - 1]!,
    medianHigh: sorted[sorted.length - rank]!,
  };
}

/**
 * The rank k (from 1) whose order statistics x(k) and x(n−k+1) bound the median of n rounds with at
 * least 95% confidence, whatever the rounds' distribution: the largest k with P(B ≤ k−1) ≤ 2.5% for B
 * binomial (n, ½). 6 for 20 rounds; 1 (the extremes, below 95%) for 5 rounds or fewer.
 */
function medianConfidenceRank(rounds: number): number {
  let rank = 0;
  let below = 0;
  let exactly = 0.5 ** rounds;
  for (let k = 0; below + exactly <= 0.025; k += 1) {
    below += exactly;
    rank = k + 1;
    exactly = (exactly * (rounds - k)) / (k + 1);
  }
  return Math.max(1, rank);
}

/** What a setup adds to the one below it, round by round: the median difference in µs per request. */
export function addedOver(runs: SideBySideRuns, name: string, below: string): number {
  return differenceOf(runs, name, below).medianUs;
}

/** What a setup adds to another in the same rounds: the median difference, its range, and the ratio. */
export interface Difference {
  medianUs: number;
  lowestUs: number;
  highestUs: number;
  ratio: Ratio;
}

export function differenceOf(runs: SideBySideRuns, name: string, below: string): Difference {
  const differences = runs[name]!.map((cpuUs, round) => cpuUs - runs[below]![round]!);
  return {
    medianUs: median(differences),
    lowestUs: Math.min(...differences),
    highestUs: Math.max(...differences),
    ratio: ratioOf(runs, name, below),
  };
}

/** How a headline row is read: against what, shown as what, over which layer, with which target. */
export interface RowTerms {
  /** The setup its ratio is taken against (its own name: none). */
  reference: string;
  /** The reference's name in the table. */
  shownAs: string;
  /** The layer below it, whose CPU it adds to; none when absent. */
  below?: string;
  /** Its ratio to bare http-proxy-3, or null for a row that is not loaded by requests. */
  vsBare: number | null;
  target?: number;
}

/** A row of the headline from the side-by-side rounds. */
export function headlineRowOf(runs: SideBySideRuns, name: string, terms: RowTerms): HeadlineRow {
  const ratio = ratioOf(runs, name, terms.reference);
  return {
    name,
    cpuUs: median(runs[name]!),
    ratio: ratio.median,
    reference: terms.reference === name ? name : terms.shownAs,
    lowest: ratio.lowest,
    highest: ratio.highest,
    vsBare: terms.vsBare,
    addedUs: terms.below ? addedOver(runs, name, terms.below) : null,
    target: terms.target ?? null,
  };
}
