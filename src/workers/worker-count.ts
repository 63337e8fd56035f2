import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import type { Config } from '../config/schema.js';

/** Where the kernel shows this process's control groups; tests point it at a folder of their own. */
export interface CgroupFiles {
  readonly mount: string;
  readonly membership: string;
}

const systemCgroups: CgroupFiles = { mount: '/sys/fs/cgroup', membership: '/proc/self/cgroup' };

/** The worker processes `workers` asks for: `auto` is one per CPU this process may use. */
export function workerCount(config: Pick<Config, 'workers'>, cgroups: CgroupFiles = systemCgroups): number {
  return config.workers === 'auto' ? usableCpus(cgroups) : config.workers;
}

/**
 * The CPUs this process may run on (its affinity), fewer when a CPU quota holds it to less: a container
 * given 2 CPUs of a 64-core node would otherwise start 64 workers that the quota throttles in turn.
 * Whole CPUs of the quota, at least one, as Uber's automaxprocs sets GOMAXPROCS.
 */
function usableCpus(cgroups: CgroupFiles): number {
  const quota = cpuQuota(cgroups);
  const cpus = availableParallelism();
  return quota === undefined ? cpus : Math.max(1, Math.min(cpus, Math.floor(quota)));
}

/** The CPU quota of this process's cgroup and of every cgroup above it, the smallest; undefined for none. */
function cpuQuota(cgroups: CgroupFiles): number | undefined {
  const unified = readText(cgroups.membership)
    ?.split('\n')
    .find((line) => line.startsWith('0::'))
    ?.slice(3);
  return unified === undefined ? cgroupV1Quota(cgroups) : cgroupV2Quota(cgroups.mount, unified);
}

/** cgroup v2: `cpu.max` is "<quota> <period>" or "max <period>" in each folder from the process's up to the mount. */
function cgroupV2Quota(mount: string, path: string): number | undefined {
  let smallest: number | undefined;
  for (let folder = join(mount, path); folder.startsWith(mount); folder = dirname(folder)) {
    const [quota, period] = readText(join(folder, 'cpu.max'))?.trim().split(' ') ?? [];
    const cpus = quota === undefined || quota === 'max' ? undefined : Number(quota) / Number(period);
    if (cpus !== undefined && cpus > 0 && Number.isFinite(cpus)) smallest = Math.min(smallest ?? cpus, cpus);
    if (folder === mount) break;
  }
  return smallest;
}

/** cgroup v1, as a container sees its own group at the mount: a quota of -1 is none. */
function cgroupV1Quota(cgroups: CgroupFiles): number | undefined {
  const folder = join(cgroups.mount, 'cpu');
  const quota = Number(readText(join(folder, 'cpu.cfs_quota_us')));
  const period = Number(readText(join(folder, 'cpu.cfs_period_us')));
  return quota > 0 && period > 0 ? quota / period : undefined;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
