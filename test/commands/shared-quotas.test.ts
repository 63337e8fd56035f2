import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import { adminUser, petsConfig, userAuth, writeSeedConfigDir } from '../helpers/test-gateway.js';

const dirs: string[] = [];
const processes: CliProcess[] = [];
afterAll(async () => {
  for (const cli of processes) {
    cli.child.kill('SIGTERM');
    await cli.exited;
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function startGateway(prefix: string): Promise<string> {
  const dir = writeSeedConfigDir(
    petsConfig('http://127.0.0.1:9', { store: { type: 'redis', url: inject('redisUrl'), prefix } }),
  );
  dirs.push(dir);
  const cli = spawnCli(['start', '--config-dir', dir]);
  processes.push(cli);
  const ports = await startedPorts(cli);
  return `http://127.0.0.1:${ports.admin}/api/portal/v1.3`;
}

describe('two gateway processes on one Redis', () => {
  it("shows a quota POSTed on one's admin port on the other's within a second", async () => {
    const prefix = `test:${randomUUID()}:`;
    const [first, second] = await Promise.all([startGateway(prefix), startGateway(prefix)]);
    const headers = { authorization: userAuth(adminUser), 'content-type': 'application/json' };
    const posted = await fetch(`${first}/quotas`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ type: 'API', name: 'shared', restrictions: [] }),
    });
    expect(posted.status).toBe(201);
    const postedAt = Date.now();
    const { id } = (await posted.json()) as { id: string };
    await expect
      .poll(async () => (await fetch(`${second}/quotas/${id}`, { headers })).status, {
        timeout: 1000,
        interval: 20,
      })
      .toBe(200);
    expect(Date.now() - postedAt).toBeLessThan(1000);

    await fetch(`${second}/quotas/${id}`, { method: 'DELETE', headers });
    await expect
      .poll(async () => (await fetch(`${first}/quotas/${id}`, { headers })).status, {
        timeout: 1000,
        interval: 20,
      })
      .toBe(404);
  });
});
