import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get, mobileId, mobileKey } from '../helpers/enforcement-gateways.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { runCli } from '../helpers/run-cli.js';
import { useTempDirs } from '../helpers/temp-dirs.js';
import { devKey, petsConfig, startTestGateway, writeConfigDir } from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import {
  costingUpstream,
  historyDay,
  historyNoon,
  historyRows,
  setHistoryQuota,
} from '../helpers/usage-history.js';

/**
 * `gateway usage export` prints what the admin API answers, from the store, offline; `import` adds an
 * export to another store: the memory store's history moved to Redis is the same history.
 */
const defer = cleanupAfterEach();
const dirs = useTempDirs('quotagate-usage-cli-');
const range = ['--from', historyDay, '--to', historyDay];
const applications = [{ id: mobileId, name: 'Mobile', apikey_development: mobileKey }];

describe('gateway usage', () => {
  it("exports the admin API's answer as JSON and CSV, and moves it from the memory store to Redis", async () => {
    const upstream = await startUpstream(costingUpstream);
    defer(() => upstream.close());
    const clock = new FakeClock(historyNoon);
    const quotasFile = path.join(dirs.make(), 'quotas.json');
    const config = petsConfig(`${upstream.url}/pets`, {
      applications,
      store: { type: 'memory', file: quotasFile },
    });
    const gateway = await startTestGateway(config, {}, { clock: clock.now, timers: clock });
    defer(() => gateway.close());
    await setHistoryQuota(gateway, 2);
    for (const key of [devKey, mobileKey, devKey, mobileKey, devKey]) await get(gateway, key, '/pets/3');
    await clock.advance(1_000);
    await expect.poll(async () => (await historyRows(gateway)).length).toBe(2);
    const answer = await historyRows(gateway);

    const json = await runCli([
      'usage',
      'export',
      ...range,
      '--format',
      'json',
      '--config-dir',
      gateway.configDir,
    ]);
    expect(json.stderr).toBe('');
    expect(JSON.parse(json.stdout)).toEqual(answer);
    const csv = await runCli(['usage', 'export', ...range, '--config-dir', gateway.configDir]);
    expect(csv.stdout.split('\n')).toEqual([
      'date,application,api,method,admitted,refused,bytesIn,bytesOut,units',
      ...answer.map((row) => Object.values(row).join(',')),
      '',
    ]);

    const historyFile = path.join(path.dirname(quotasFile), 'usage-history.json');
    const moved = await runCli(['usage', 'export', ...range, '--format', 'json', '--from-file', historyFile]);
    expect(JSON.parse(moved.stdout)).toEqual(answer);
    const exported = path.join(dirs.make(), 'history.json');
    writeFileSync(exported, moved.stdout);
    const redisConfig = writeConfigDir(
      petsConfig(upstream.url, {
        applications,
        store: { type: 'redis', url: inject('redisUrl'), prefix: `test:usage-cli:${Date.now()}:` },
      }),
    );
    dirs.removeAfter(redisConfig);
    const imported = await runCli(['usage', 'import', exported, '--config-dir', redisConfig]);
    expect([imported.code, imported.stdout]).toEqual([0, 'added 2 lines to the usage history\n']);
    const fromRedis = await runCli([
      'usage',
      'export',
      ...range,
      '--format',
      'json',
      '--config-dir',
      redisConfig,
    ]);
    expect(JSON.parse(fromRedis.stdout)).toEqual(answer);
  });

  it('refuses a range it cannot answer, with exit code 2', async () => {
    const configDir = writeConfigDir(petsConfig('http://127.0.0.1:9/pets'));
    dirs.removeAfter(configDir);
    const backwards = await runCli([
      'usage',
      'export',
      '--from',
      '2026-11-02',
      '--to',
      '2026-11-01',
      '--config-dir',
      configDir,
    ]);
    expect([backwards.code, backwards.stderr]).toEqual([2, expect.stringContaining('is later than to')]);
    const missing = await runCli(['usage', 'export', '--from', '2026-11-02', '--config-dir', configDir]);
    expect([missing.code, missing.stderr]).toEqual([
      2,
      expect.stringContaining('export needs --from and --to'),
    ]);
  });
});
