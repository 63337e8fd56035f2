import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's utime and stime (`getconf CLK_TCK`). */
const ticksPerSecond = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

interface ProcessTimes {
  ppid: number;
  /** utime + stime + cutime + cstime, in ticks. */
  ticks: number;
}

/**
 * Every process of the machine by pid, from /proc/<pid>/stat: its parent, and its CPU ticks (user and
 * system) with those of its children it has waited for, so that a worker that exits during a round still
 * counts, in its parent's cutime and cstime.
 */
function processTable(): Map<number, ProcessTimes> {
  const table = new Map<number, ProcessTimes>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited since the directory was read
    }
    // The fields after the `)` that ends the command name (which may hold spaces and parentheses): state,
    // ppid, … utime (14th field of the line), stime, cutime, cstime.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    table.set(Number(name), {
      ppid: Number(fields[1]),
      ticks: Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]),
    });
  }
  return table;
}

export interface TreeTime {
  /** CPU seconds (user + system) of the process and all its descendants, exited ones reaped inside the tree included. */
  seconds: number;
  /** The pids of the tree at the time of reading, the root first. */
  pids: number[];
}

/**
 * The CPU time so far of `pid` and every process whose chain of parents leads to it (an nginx master and
 * its workers; a Node primary and its node:cluster workers). Null where /proc cannot tell (not Linux, or
 * the process is gone).
 */
export function treeCpuTime(pid: number): TreeTime | null {
  try {
    const table = processTable();
    if (!table.has(pid)) return null;
    const children = new Map<number, number[]>();
    for (const [child, { ppid }] of table) {
      const siblings = children.get(ppid);
      if (siblings) siblings.push(child);
      else children.set(ppid, [child]);
    }
    const pids: number[] = [];
    const pending = [pid];
    while (pending.length > 0) {
      const next = pending.shift()!;
      pids.push(next);
      pending.push(...(children.get(next) ?? []));
    }
    const ticks = pids.reduce((sum, one) => sum + table.get(one)!.ticks, 0);
    return { seconds: ticks / ticksPerSecond, pids };
  } catch {
    return null;
  }
}

/** CPU seconds of the process tree of `pid` so far (see treeCpuTime); null where /proc cannot tell. */
export function cpuSeconds(pid: number): number | null {
  return treeCpuTime(pid)?.seconds ?? null;
}

/**
 * CPU seconds the whole machine has spent running processes so far (user, nice, system, irq and softirq
 * time of every core, from /proc/stat; steal apart). Interrupts count because the kernel also charges a
 * tick spent in one to the process it interrupted: loopback traffic's softirqs are in the servers' stime,
 * and leaving them out of the machine's time made "other processes" negative. Null where /proc cannot tell.
 */
export function machineCpuSeconds(): number | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const [user = NaN, nice = NaN, system = NaN, , , irq = NaN, softirq = NaN] = line
      .split(/\s+/)
      .slice(1)
      .map(Number);
    const seconds = (user + nice + system + irq + softirq) / ticksPerSecond;
    return Number.isFinite(seconds) ? seconds : null;
  } catch {
    return null;
  }
}
