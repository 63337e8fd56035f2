import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { treeCpuTime } from './cpu-time.js';

/**
 * Which cores the servers under test run on and which the load generators, upstream and Redis run on.
 * With two cores or more and `taskset` at hand, the servers share the last core and everything else gets
 * the others: the servers then compete only with one another (fairly, under the kernel's scheduler), not
 * with their own load, which is what makes side-by-side ratios steady. Null where nothing is pinned.
 */
export interface Pinning {
  servers: string;
  load: string;
}

export function choosePinning(wanted: boolean): Pinning | null {
  const cores = os.availableParallelism();
  if (!wanted || cores < 2) return null;
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
  } catch {
    return null;
  }
  return { servers: String(cores - 1), load: cores === 2 ? '0' : `0-${cores - 2}` };
}

/** Puts every thread of `pid`'s process tree on `cpus` (a taskset list). */
export function pinTree(pid: number, cpus: string): void {
  for (const one of treeCpuTime(pid)?.pids ?? [pid]) {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', cpus, String(one)], { stdio: 'ignore' });
    } catch {
      // The process exited meanwhile: nothing to pin.
    }
  }
}
