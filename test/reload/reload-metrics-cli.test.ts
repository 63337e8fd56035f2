import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import { petsConfig, writeSeedConfigDir } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/**
 * What a reload leaves in the metrics, read as Prometheus reads them: the admin listener's `/metrics` of
 * `gateway start` in a process of its own (with `workers: 1`, the data plane in a thread and the admin
 * listener in the main thread; with `workers: 2`, two worker processes), after a SIGHUP. The shipped
 * alert `QuotagateReloadRefused` fires on `quotagate_config_last_reload_successful == 0`.
 */
const tempDirs = useTempDirs('quotagate-reload-metrics-');

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream((_req, res) => res.end('ok'));
});
afterAll(() => upstream.close());

const running: CliProcess[] = [];
afterEach(async () => {
  for (const cli of running.splice(0)) {
    if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
  }
});

/** The value of one series of a `/metrics` text (`name` with its labels as written), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** The reload series of the admin listener's `/metrics`. */
async function reloadSeries(adminUrl: string) {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  return {
    lastSuccessful: sample(text, 'quotagate_config_last_reload_successful'),
    applied: sample(text, 'quotagate_config_reloads_total{result="applied"}'),
    refused: sample(text, 'quotagate_config_reloads_total{result="refused"}'),
  };
}

/** Counts the log lines of `cli` whose message is `msg`, from any process or thread of the gateway. */
const linesSaying = (cli: CliProcess, msg: string) =>
  cli
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{') && (JSON.parse(line) as { msg?: string }).msg === msg).length;

describe.each([1, 2])('a reload under gateway start with workers: %i, in the metrics', (workers) => {
  it('a refused reload turns quotagate_config_last_reload_successful to 0 and counts result="refused" once; the next applied one turns it back to 1', async () => {
    const config = petsConfig(`${upstream.url}/pets`, { workers });
    const dir = writeSeedConfigDir(config);
    tempDirs.removeAfter(dir);
    const file = path.join(dir, 'default.js');
    const good = readFileSync(file, 'utf8');
    const cli = spawnCli(['start', '--config-dir', dir, '--pid-file', path.join(dir, 'gateway.pid')]);
    running.push(cli);
    const adminUrl = `http://127.0.0.1:${(await startedPorts(cli, 30_000)).admin}`;
    expect(await reloadSeries(adminUrl)).toEqual({
      lastSuccessful: 1,
      applied: undefined,
      refused: undefined,
    });

    writeFileSync(file, 'module.exports = {\n  apis: [ ,\n};\n');
    cli.child.kill('SIGHUP');
    await cli.waitFor('config reload refused');
    expect(await reloadSeries(adminUrl)).toEqual({ lastSuccessful: 0, applied: undefined, refused: 1 });

    writeFileSync(file, good);
    cli.child.kill('SIGHUP');
    // The primary says so once its data planes have answered: each of them, then itself.
    await expect.poll(() => linesSaying(cli, 'config reloaded'), { timeout: 10_000 }).toBe(workers + 1);
    expect(await reloadSeries(adminUrl)).toEqual({ lastSuccessful: 1, applied: 1, refused: 1 });
  }, 60_000);
});
