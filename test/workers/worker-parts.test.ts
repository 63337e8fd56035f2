import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ConfigError } from '../../src/kit/config-error.js';
import { loadConfig } from '../../src/config/load-config.js';
import { wellKnownQuotas } from '../../src/quota/model.js';
import { stored } from '../../src/quota/stored-records.js';
import type { StoredQuota } from '../../src/quota/model.js';
import { NumberedFeed } from '../../src/workers/numbered-feed.js';
import { DefinitionsFeed } from '../../src/workers/definitions-feed.js';
import { IpcPeer } from '../../src/workers/ipc-peer.js';
import { restartDelayMs } from '../../src/workers/worker-pool.js';
import { workerCount } from '../../src/workers/worker-count.js';
import { ipcPair } from '../helpers/ipc-pair.js';

describe('the workers key', () => {
  it('defaults to 1 and takes a whole number or auto (one per CPU)', () => {
    expect(workerCount({ workers: 1 })).toBe(1);
    expect(workerCount({ workers: 4 })).toBe(4);
    expect(workerCount({ workers: 'auto' }, cgroupsOf({}))).toBe(availableParallelism());
  });

  it('auto is the whole CPUs of the smallest cgroup quota above the process when that is fewer, at least one', () => {
    const auto = (files: Record<string, string>) => workerCount({ workers: 'auto' }, cgroupsOf(files));
    const membership = '0::/kubepods/pod1/gateway\n';
    expect(auto({ membership, 'kubepods/pod1/gateway/cpu.max': 'max 100000\n' })).toBe(
      availableParallelism(),
    );
    expect(auto({ membership, 'kubepods/pod1/gateway/cpu.max': '50000 100000\n' })).toBe(1);
    expect(auto({ membership, 'kubepods/pod1/cpu.max': '150000 100000\n', 'cpu.max': 'max 100000' })).toBe(1);
    expect(
      auto({
        membership,
        'kubepods/cpu.max': '200000 100000\n',
        'kubepods/pod1/gateway/cpu.max': '900000 100000',
      }),
    ).toBe(Math.min(2, availableParallelism()));
    expect(auto({ membership: '0::/\n', 'cpu.max': '100000 100000\n' })).toBe(1);
    expect(
      auto({
        membership: '4:cpu,cpuacct:/docker/1\n',
        'cpu/cpu.cfs_quota_us': '50000\n',
        'cpu/cpu.cfs_period_us': '100000\n',
      }),
    ).toBe(1);
    expect(
      auto({
        membership: '4:cpu,cpuacct:/\n',
        'cpu/cpu.cfs_quota_us': '-1\n',
        'cpu/cpu.cfs_period_us': '100000\n',
      }),
    ).toBe(availableParallelism());
  });

  it('rejects a count that is not a whole number from 1 to 1024 or auto, naming the file and the key', async () => {
    const dir = 'test/fixtures/bad-config/workers-invalid';
    const problems = await loadConfig({ configDir: dir, env: {} }).then(
      () => [],
      (error: unknown) => (error instanceof ConfigError ? error.problems : [String(error)]),
    );
    expect(problems).toEqual([
      `${dir}/default.mjs: workers: must be a whole number from 1 to 1024, or "auto" (one per CPU)`,
    ]);
  });
});

/** A cgroup mount of the given files under a fresh folder; `membership` stands for /proc/self/cgroup. */
function cgroupsOf(files: Record<string, string>) {
  const root = mkdtempSync(join(tmpdir(), 'quotagate-cgroup-'));
  cgroupFolders.push(root);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, 'fs', name)), { recursive: true });
    writeFileSync(join(root, 'fs', name), text);
  }
  return { mount: join(root, 'fs'), membership: join(root, 'fs', 'membership') };
}

const cgroupFolders: string[] = [];
afterAll(() => {
  for (const folder of cgroupFolders) rmSync(folder, { recursive: true, force: true });
});

describe('restarts of a worker that exited', () => {
  it('wait 100 ms, doubling with each quick exit in a row, and never more than 10 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 20].map(restartDelayMs)).toEqual([
      100, 200, 400, 800, 1_600, 3_200, 6_400, 10_000, 10_000,
    ]);
  });
});

describe('the quota definitions of a worker', () => {
  it('take the reset generations of the latest set, with its definitions', () => {
    const feed = new DefinitionsFeed();
    const heard: Array<number | undefined> = [];
    feed.onChange(() => heard.push(feed.resets().get('app-a')?.get('q:0:a:app:')));
    feed.replace({ generation: 2, records: [], resets: { 'app-a': { 'q:0:a:app:': 2 } } });
    feed.replace({ generation: 1, records: [], resets: { 'app-a': { 'q:0:a:app:': 1 } } });
    expect(heard).toEqual([2]);
    expect(feed.resets().get('app-a')?.get('q:0:a:app:')).toBe(2);
  });

  it('keep the latest set, whichever order the answer to its hello and a change arrive in', () => {
    const [system, applicationDefault] = wellKnownQuotas().map(stored);
    const feed = new NumberedFeed<StoredQuota>();
    const heard: string[][] = [];
    feed.onChange((records) => heard.push(records.map((record) => record.quota.name)));
    feed.replace({ generation: 2, records: [system!, applicationDefault!] });
    feed.replace({ generation: 1, records: [system!] });
    expect(feed.all().map((record) => record.quota.name)).toEqual(['System', 'Application Default']);
    feed.replace({ generation: 3, records: [applicationDefault!] });
    expect(heard).toEqual([['System', 'Application Default'], ['Application Default']]);
  });
});

describe('the IPC channel of a primary and a worker', () => {
  function peers() {
    const channel = ipcPair();
    return { primary: new IpcPeer(channel.primary), worker: new IpcPeer(channel.worker), channel };
  }

  it('answers each request by its id, however the answers interleave', async () => {
    const { primary, worker } = peers();
    primary.answer('usage', async ({ keyPrefix, windowMs }) => {
      await new Promise((resolve) => setTimeout(resolve, keyPrefix === 'slow' ? 20 : 0));
      return [{ key: keyPrefix, used: windowMs, resetMs: 0 }];
    });
    const [slow, fast] = await Promise.all([
      worker.request('usage', { keyPrefix: 'slow', windowMs: 1 }),
      worker.request('usage', { keyPrefix: 'fast', windowMs: 2 }),
    ]);
    expect(slow).toEqual([{ key: 'slow', used: 1, resetMs: 0 }]);
    expect(fast).toEqual([{ key: 'fast', used: 2, resetMs: 0 }]);
  });

  it("rejects a request with the message of the other end's failure, or when nothing answers its kind", async () => {
    const { primary, worker } = peers();
    primary.answer('trip', () => {
      throw new Error('counters closed');
    });
    await expect(
      worker.request('trip', { checks: [], additions: [], giveBacks: [], live: 1 }),
    ).rejects.toThrow('counters closed');
    await expect(worker.request('usage', { keyPrefix: '', windowMs: 1 })).rejects.toThrow(
      "no answer to 'usage' here",
    );
  });

  it('delivers notices in the order they were sent', async () => {
    const { primary, worker } = peers();
    const heard: number[] = [];
    worker.on('definitions', ({ generation }) => heard.push(generation));
    for (const generation of [3, 1, 4, 1, 5])
      primary.notify('definitions', { generation, records: [], resets: {} });
    await expect.poll(() => heard).toEqual([3, 1, 4, 1, 5]);
  });

  it('rejects the requests waiting for an answer when the channel closes, and later ones at once', async () => {
    const { primary, worker, channel } = peers();
    primary.answer('metrics', () => new Promise(() => undefined));
    const waiting = worker.request('metrics', null);
    channel.close();
    await expect(waiting).rejects.toThrow('the IPC channel closed');
    expect(worker.open).toBe(false);
    await expect(worker.request('metrics', null)).rejects.toThrow('the IPC channel is closed');
  });
});
