import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observe/log.js';
import { FileQuotaRepository } from '../../src/quota/file-quota-repository.js';
import { sampleQuota } from '../helpers/quota-repository-contract.js';

const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the PUT loop until it has acknowledged a few writes, then kills it with SIGKILL mid-stream. */
function runAndKill(file: string, quotaId: string, firstVersion: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['test/fixtures/crash/put-loop.mjs', file, quotaId, String(firstVersion)],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let lastAcked: number | null = null;
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += String(chunk);
      for (const match of output.matchAll(/acked (\d+)\n/g)) lastAcked = Number(match[1]);
      if (output.includes('ready') && !child.killed) {
        // A random moment within the write loop: anywhere in temp-file write, fsync, rename or fsync.
        setTimeout(() => child.kill('SIGKILL'), 5 + Math.random() * 40);
      }
    });
    child.on('error', reject);
    child.on('exit', () => {
      for (const match of output.matchAll(/acked (\d+)\n/g)) lastAcked = Number(match[1]);
      resolve(lastAcked);
    });
  });
}

describe('crash safety of the file store', () => {
  it('leaves a parsable file holding the last acknowledged version (or the one being written) after 25 SIGKILLs', async () => {
    const file = path.join(dir, 'quotas.json');
    const quota = sampleQuota();
    const setup = new FileQuotaRepository(file, createLogger({ level: 'silent' }));
    await setup.open();
    await setup.create({ quota: { ...quota, description: 'version 0' } });
    let acknowledged = 0;
    for (let round = 0; round < 25; round += 1) {
      const lastAcked = await runAndKill(file, quota.id, acknowledged + 1);
      if (lastAcked !== null) acknowledged = lastAcked;
      expect(() => JSON.parse(readFileSync(file, 'utf8'))).not.toThrow();
      const reopened = new FileQuotaRepository(file, createLogger({ level: 'silent' }));
      await reopened.open();
      const version = Number(/^version (\d+)$/.exec(reopened.get(quota.id)!.quota.description)![1]);
      expect([acknowledged, acknowledged + 1]).toContain(version);
      acknowledged = version;
    }
    expect(acknowledged).toBeGreaterThan(25);
  }, 60_000);
});
