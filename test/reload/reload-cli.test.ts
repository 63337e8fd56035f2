import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli, spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import { basicAuth, devKey, petsConfig, writeSeedConfigDir } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * SIGHUP and `gateway reload` through the real CLI: a gateway process (and with `workers: 2` its
 * workers) on 127.0.0.1, its conf/default.js rewritten on disk. Every process is stopped by pid.
 */
const appKey = 'app-key-0123456789abcdef0123456789';
const application = {
  id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f',
  name: 'Mobile app',
  apikey_development: appKey,
};

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream((_req, res) => res.end('ok'));
});
afterAll(() => upstream.close());

const started: Array<{ cli: CliProcess; dir: string }> = [];
const cleanups: Array<() => void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  for (const { cli, dir } of started.splice(0)) {
    if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGTERM');
    await cli.exited;
    rmSync(dir, { recursive: true, force: true });
  }
});

interface Running {
  cli: CliProcess;
  dir: string;
  pidFile: string;
  url: string;
  logs(): Array<Record<string, unknown>>;
  /** Rewrites conf/default.js with `extra` over the pets config. */
  rewrite(extra: Record<string, unknown>): void;
}

async function start(extra: Record<string, unknown> = {}): Promise<Running> {
  const dir = writeSeedConfigDir(petsConfig(`${upstream.url}/pets`, extra));
  const pidFile = path.join(dir, 'gateway.pid');
  const cli = spawnCli(['start', '--config-dir', dir, '--pid-file', pidFile]);
  started.push({ cli, dir });
  const ports = await startedPorts(cli, 30_000);
  const file = path.join(dir, 'default.js');
  // As writeSeedConfigDir keeps it: in the test's folder.
  const store = { type: 'memory', file: path.join(dir, 'quotas.json') };
  return {
    cli,
    dir,
    pidFile,
    url: `http://127.0.0.1:${ports.http}`,
    logs: () =>
      cli
        .stdout()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>),
    rewrite(next) {
      const config = { ...petsConfig(`${upstream.url}/pets`, next), store };
      writeFileSync(file, `module.exports = ${JSON.stringify(config, null, 2)};\n`);
    },
  };
}

/** One request on a connection of its own (so that every worker of a cluster gets some). */
function get(url: string, key: string, agent: http.Agent | false = false): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(`${url}/pets/1`, { agent, headers: { authorization: basicAuth(key) } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
      .on('error', reject);
  });
}

const reloadLines = (gateway: Running, msg: string) => gateway.logs().filter((line) => line.msg === msg);

describe('gateway reload and SIGHUP', () => {
  it('gateway reload checks the config, then the running gateway puts it in force; a bad one is refused before any signal', async () => {
    const gateway = await start();
    expect(Number(readFileSync(gateway.pidFile, 'utf8'))).toBe(gateway.cli.child.pid);
    expect(await get(gateway.url, appKey)).toBe(401);

    gateway.rewrite({ applications: [application] });
    const asked = await runCli(['reload', '--config-dir', gateway.dir, '--pid-file', gateway.pidFile]);
    expect(asked.code).toBe(0);
    expect(asked.stdout).toContain(`asked the gateway (process ${gateway.cli.child.pid}) to reload it`);
    await gateway.cli.waitFor('"msg":"config reloaded"');
    expect(await get(gateway.url, appKey)).toBe(200);

    // Two mistakes: both named, exit 2, and the gateway is not asked.
    gateway.rewrite({ applications: [application], proxyTimeout: 0, trustProxy: ['not-an-address'] });
    const refused = await runCli(['reload', '--config-dir', gateway.dir, '--pid-file', gateway.pidFile]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/default\.js: proxyTimeout: must be a positive number of milliseconds/);
    expect(refused.stderr).toMatch(/default\.js: trustProxy\[0\]: must be an IP address or CIDR/);
    expect(reloadLines(gateway, 'reloading the config')).toHaveLength(1);
    expect(await get(gateway.url, appKey)).toBe(200);
  }, 60_000);

  it('SIGHUP with a broken config: the gateway logs every mistake, keeps running and keeps its config', async () => {
    const gateway = await start({ applications: [application] });
    writeFileSync(path.join(gateway.dir, 'default.js'), 'module.exports = {\n  port: 0,\n  apis: [ ,\n};\n');
    gateway.cli.child.kill('SIGHUP');
    await gateway.cli.waitFor('config reload refused');
    const [refused] = reloadLines(gateway, 'config reload refused: the running config stays');
    expect(refused?.problems).toEqual([
      expect.stringMatching(/default\.js: line 4, column 1: cannot load: SyntaxError: Unexpected token '}'$/),
    ]);
    expect(gateway.cli.child.exitCode).toBeNull();
    expect(await get(gateway.url, appKey)).toBe(200);
  }, 60_000);

  it('with workers: 2 under load, SIGHUP puts a new key in force on every worker and no request fails', async () => {
    const gateway = await start({ workers: 2 });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const statuses: number[] = [];
    const failures: unknown[] = [];
    let loading = true;
    const client = async () => {
      while (loading)
        await get(gateway.url, devKey, agent).then(
          (status) => statuses.push(status),
          (error) => failures.push(error),
        );
    };
    const clients = Array.from({ length: 8 }, client);
    try {
      await expect.poll(() => statuses.length).toBeGreaterThan(50);
      gateway.rewrite({ workers: 2, applications: [application] });
      gateway.cli.child.kill('SIGHUP');
      // The primary says so once its workers have answered.
      await gateway.cli.waitFor(
        /"worker":\d+.*"msg":"config reloaded"[\s\S]*"worker":\d+.*"msg":"config reloaded"/,
      );
      await expect.poll(() => reloadLines(gateway, 'config reloaded').length).toBe(3);
      const answered = statuses.length;
      await expect.poll(() => statuses.length).toBeGreaterThan(answered + 50);
      // New connections spread over both workers: each knows the key.
      const withKey = await Promise.all(Array.from({ length: 20 }, () => get(gateway.url, appKey)));
      expect(withKey.filter((status) => status !== 200)).toEqual([]);
    } finally {
      loading = false;
      await Promise.all(clients);
      agent.destroy();
    }
    expect(failures).toEqual([]);
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    expect(reloadLines(gateway, 'a worker refused the reload: it runs the config it had')).toEqual([]);
  }, 60_000);

  it('gateway reload says so when no gateway runs with the id of the pid file', async () => {
    const dir = writeSeedConfigDir(petsConfig(`${upstream.url}/pets`));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const missing = await runCli(['reload', '--config-dir', dir, '--pid-file', path.join(dir, 'none.pid')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('holds no process id: is the gateway running here?');
    const stale = path.join(dir, 'stale.pid');
    writeFileSync(stale, '999999999\n');
    const result = await runCli(['reload', '--config-dir', dir, '--pid-file', stale]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('the gateway is not running (the file is stale)');
  });
});
