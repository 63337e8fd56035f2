import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startCliGateway } from '../helpers/cli-gateway.js';
import { get, mobileId, mobileKey } from '../helpers/enforcement-gateways.js';
import { runCli } from '../helpers/run-cli.js';
import { useTempDirs } from '../helpers/temp-dirs.js';
import { devKey, petsConfig, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import { costingUpstream, historyAnswer } from '../helpers/usage-history.js';

/**
 * `gateway start` with worker processes and the memory store: each worker sends its lines to the
 * primary, which owns the history file; a SIGTERM writes every line before the process exits.
 */
const defer = cleanupAfterEach();
const dirs = useTempDirs('quotagate-usage-start-');

describe('the usage history of gateway start', () => {
  it("gathers its workers' lines in the primary's file, the last ones on SIGTERM", async () => {
    const upstream = await startUpstream(costingUpstream);
    defer(() => upstream.close());
    const applications = [{ id: mobileId, name: 'Mobile', apikey_development: mobileKey }];
    const config = petsConfig(`${upstream.url}/pets`, {
      applications,
      workers: 2,
      accessLog: { flushMs: 0 },
      store: { type: 'memory', file: path.join(dirs.make(), 'quotas.json') },
    });
    const gateway = await startCliGateway(config, defer);
    // What the data-plane helpers read of a gateway: its URL.
    const target = { url: gateway.url } as TestGateway;
    for (let i = 0; i < 6; i += 1)
      expect((await get(target, i % 2 ? devKey : mobileKey, '/pets/1')).status).toBe(200);
    // The UTC days around now: the test may run across a midnight.
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
    const range = `from=${day(-1)}&to=${day(1)}`;
    const sum = (rows: unknown) =>
      (rows as Array<{ admitted: number }>).reduce((all, row) => all + row.admitted, 0);
    const admin = { adminUrl: gateway.adminUrl } as TestGateway;
    await expect.poll(async () => sum((await historyAnswer(admin, `/usage/history?${range}`)).body)).toBe(6);

    await get(target, mobileKey, '/pets/1');
    gateway.cli.child.kill('SIGTERM');
    expect((await gateway.cli.exited).code).toBe(0);
    const exported = await runCli([
      'usage',
      'export',
      '--from',
      day(-1),
      '--to',
      day(1),
      '--format',
      'json',
      '--config-dir',
      gateway.dir,
    ]);
    const rows = JSON.parse(exported.stdout) as Array<{ application: string; admitted: number }>;
    expect(rows.map((row) => [row.application, row.admitted])).toEqual([
      [mobileId, 4],
      ['project', 3],
    ]);
    expect(sum(rows)).toBe(gateway.accessLines().length);
  });
});
