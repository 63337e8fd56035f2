import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's utime and stime (`getconf CLK_TCK`). */
const ticksPerSecond = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of one process, in ticks; the fields after the `)` that ends the command name. */
function ticksOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

function childrenOf(pid: number): number[] {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return text ? text.split(' ').map(Number) : [];
  } catch {
    return [];
  }
}

/**
 * CPU seconds (user + system) a process and its children have used so far: an nginx master's work is
 * done by its worker. Null where /proc cannot tell (not Linux).
 */
export function cpuSeconds(pid: number): number | null {
  try {
    const pids = [pid, ...childrenOf(pid)];
    return pids.reduce((sum, one) => sum + ticksOf(one), 0) / ticksPerSecond;
  } catch {
    return null;
  }
}
