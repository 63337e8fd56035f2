import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observe/log.js';
import { hashPassword } from '../../src/kit/password-hash.js';
import { FileQuotaRepository } from '../../src/quota/file-quota-repository.js';
import { request } from '../helpers/raw-http.js';
import { runCli, spawnCli, startedPorts } from '../helpers/run-cli.js';
import { basicAuth, devKey, petsConfig, userAuth, writeConfigDir } from '../helpers/test-gateway.js';
import { startHoldingUpstream } from '../helpers/holding-upstream.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { useTempDirs } from '../helpers/temp-dirs.js';
import { freePort } from '../helpers/free-port.js';
import { listeningAddresses } from '../helpers/listening-addresses.js';

const tempDirs = useTempDirs('quotagate-cli-');

/** The README's sample of what the demo's loop prints: each answer's status, `r`, `t` and Retry-After. */
function readmeLoopSample(): Array<{ status: number; r: string; t: string; retryAfter?: string }> {
  const readme = readFileSync('README.md', 'utf8');
  const block = /the loop answers:\n\n```\n([\s\S]*?)```/.exec(readme)![1]!;
  return block.split(/^(?=HTTP\/)/m).map((answer) => {
    const [, r, t] = /^ratelimit: .*;r=(\d+);t=(\d+)$/m.exec(answer)!;
    const retryAfter = /^retry-after: (\d+)$/m.exec(answer)?.[1];
    return { status: Number(answer.split(' ')[1]), r: r!, t: t!, ...(retryAfter ? { retryAfter } : {}) };
  });
}

describe('gateway start', () => {
  let upstream: TestUpstream;
  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`done ${req.url}`);
    });
  });
  afterAll(() => upstream.close());

  it('proxies a one-API config and answers a missing key with the exact 401 body', async () => {
    const dir = writeConfigDir(petsConfig(upstream.url));
    tempDirs.removeAfter(dir);
    const cli = spawnCli(['start', '--config-dir', dir]);
    try {
      const ports = await startedPorts(cli);
      const url = `http://127.0.0.1:${ports.http}`;
      const ok = await request(url, { path: '/pets/1', headers: { authorization: basicAuth(devKey) } });
      expect(ok).toMatchObject({ status: 200, body: 'done /1' });
      const denied = await request(url, { path: '/pets/1' });
      expect(denied.status).toBe(401);
      expect(denied.body).toBe(
        '{"id":"com.vendor.api.unauthorized","message":"Unauthorized","success":false}',
      );
    } finally {
      cli.child.kill('SIGTERM');
      await cli.exited;
    }
  });

  it('writes the access lines it gathered on SIGUSR2, and the rest when it stops on SIGTERM', async () => {
    // A minute of gathering: only the signals can have the lines written within this test.
    const dir = writeConfigDir(petsConfig(upstream.url, { accessLog: { flushMs: 60_000 } }));
    tempDirs.removeAfter(dir);
    const cli = spawnCli(['start', '--config-dir', dir]);
    const ports = await startedPorts(cli);
    const url = `http://127.0.0.1:${ports.http}`;
    const accessLines = () =>
      cli
        .stdout()
        .split('\n')
        .filter((line) => line.includes('"msg":"request"'));
    const headers = (id: string) => ({ authorization: basicAuth(devKey), 'x-request-id': id });
    await request(url, { path: '/pets/1', headers: headers('first') });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(accessLines()).toEqual([]);
    cli.child.kill('SIGUSR2');
    await cli.waitFor('"requestId":"first"', 2_000);
    await request(url, { path: '/pets/2', headers: headers('second') });
    cli.child.kill('SIGTERM');
    const result = await cli.exited;
    expect(result.code).toBe(0);
    expect(accessLines().map((line) => (JSON.parse(line) as { requestId: string }).requestId)).toEqual([
      'first',
      'second',
    ]);
  });

  it('exits 0 on SIGTERM as soon as the request in flight has finished, long before the grace period ends', async () => {
    const held = await startHoldingUpstream();
    // A grace period longer than the test: a gateway that waited for it would fail the test.
    const dir = writeConfigDir(petsConfig(held.url, { shutdownTimeout: 120_000 }));
    tempDirs.removeAfter(dir);
    const cli = spawnCli(['start', '--config-dir', dir]);
    try {
      const ports = await startedPorts(cli);
      const inFlight = request(`http://127.0.0.1:${ports.http}`, {
        path: '/pets/1',
        headers: { authorization: basicAuth(devKey) },
      });
      await expect.poll(() => held.held()).toBe(1);
      cli.child.kill('SIGTERM');
      await cli.waitFor('"msg":"worker draining"');
      held.answerAll();
      const [response, result] = await Promise.all([inFlight, cli.exited]);
      expect(response).toMatchObject({ status: 200, body: 'done' });
      expect(response.headers.connection).toBe('close');
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('"msg":"gateway stopped"');
      expect(result.stdout).not.toContain('grace period over');
    } finally {
      cli.child.kill('SIGKILL');
      await held.close();
    }
  });

  it('closes requests still open at the end of the grace period and exits 0', async () => {
    const hung = await startUpstream(() => undefined);
    const dir = writeConfigDir(petsConfig(hung.url, { shutdownTimeout: 300 }));
    tempDirs.removeAfter(dir);
    const cli = spawnCli(['start', '--config-dir', dir]);
    const ports = await startedPorts(cli);
    const stuck = new Promise<string>((resolve) => {
      http
        .get(`http://127.0.0.1:${ports.http}/pets/1`, { headers: { authorization: basicAuth(devKey) } }, () =>
          resolve('answered'),
        )
        .on('error', () => resolve('closed'));
    });
    await expect.poll(() => hung.requests.length).toBe(1);
    cli.child.kill('SIGTERM');
    const result = await cli.exited;
    expect(result.code).toBe(0);
    expect(await stuck).toBe('closed');
    expect(result.stdout).toContain('grace period over');
    await hung.close();
  });

  it('exits 1 with a message when its port is taken', async () => {
    const dir = writeConfigDir(petsConfig(upstream.url, { port: upstream.port }));
    tempDirs.removeAfter(dir);
    const result = await runCli(['start', '--config-dir', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('EADDRINUSE');
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it.each([
    [
      'port',
      (taken: number) => ({ port: taken }),
      "the data plane's port {taken} is in use (EADDRINUSE): set port, or PORT, to another",
    ],
    [
      'admin.port',
      (taken: number) => ({ admin: { host: '127.0.0.1', port: taken } }),
      "the admin listener's port {taken} is in use (EADDRINUSE): set admin.port, or ADMIN_PORT, to another",
    ],
  ])(
    'names the listener whose port is taken, and the setting that moves it: %s',
    async (_key, overrides, message) => {
      const dir = writeConfigDir(petsConfig(upstream.url, overrides(upstream.port)));
      tempDirs.removeAfter(dir);
      const result = await runCli(['start', '--config-dir', dir]);
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(`gateway start: ${message.replace('{taken}', String(upstream.port))}\n`);
    },
  );

  it('exits 2 on a bad config', async () => {
    const result = await runCli(['start', '--config-dir', 'test/fixtures/bad-config/port-out-of-range']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'test/fixtures/bad-config/port-out-of-range/default.mjs: port: must be an integer from 0 to 65535, or false (no plain-HTTP listener)\n',
    );
  });

  it('ends quietly with exit 0 when the reader closes the pipe early (config-schema | head -c 100)', async () => {
    const cli = spawnCli(['config-schema']);
    // Closed before the command writes: every write of it meets a pipe without a reader.
    cli.child.stdout!.destroy();
    const result = await cli.exited;
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('says how to give the shipped config its key: check-config and start exit 2 naming APIKEY_DEVELOPMENT and --demo', async () => {
    for (const args of [['check-config'], ['start']]) {
      const result = await runCli(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toContain(
        "conf/default.js: apikey_development: required when APIKeyAuthType is 'basic': set it, or set APIKEY_DEVELOPMENT",
      );
      expect(result.stderr).toContain('`gateway start --demo` makes one up for its run');
    }
    // A memory store's file, as a gateway of this checkout leaves it in data/, exported without a key.
    const dir = tempDirs.make();
    const file = path.join(dir, 'quotas.json');
    const repository = new FileQuotaRepository(file, createLogger({ level: 'silent' }));
    await repository.open();
    await repository.close();
    const exported = await runCli(['quotas', 'export', '--format', 'json', '--from-file', file]);
    expect(exported.code).toBe(0);
    expect((JSON.parse(exported.stdout) as { quotas: unknown[] }).quotas).toHaveLength(2);
  });

  it("never prints an admin password's hash as the password: the banner names the user, and its curl asks", async () => {
    const hash = await hashPassword('ann-chose-this-one');
    const dir = writeConfigDir(
      petsConfig('https://127.0.0.1:9/pets', {
        admin: { host: '127.0.0.1', port: 0, users: [{ username: 'ann', password: hash, role: 'admin' }] },
      }),
    );
    tempDirs.removeAfter(dir);
    const cli = spawnCli(['start', '--demo', '--config-dir', dir], { env: { PORT: '0' } });
    try {
      await cli.waitFor('Ctrl-C stops it.');
      const banner = cli.stderr();
      expect(banner).not.toContain('scrypt$');
      expect(banner).toContain('log in as ann, with the password whose hash conf/ holds');
      const curl = /curl -u '([^']*)' (http:\S+)/.exec(banner)!;
      expect(curl[1]).toBe('ann');
      const answer = await request(new URL(curl[2]!).origin, {
        path: new URL(curl[2]!).pathname,
        headers: { authorization: userAuth({ username: 'ann', password: 'ann-chose-this-one' }) },
      });
      expect(answer.status).toBe(200);
    } finally {
      cli.child.kill('SIGTERM');
      expect((await cli.exited).code).toBe(0);
    }
  });

  it("runs the demo of the README on the port DEMO_UPSTREAM_PORT names: its curl lines answer 200 and 401, and its loop reaches the quota's 429", async () => {
    const demoPort = await freePort();
    const cli = spawnCli(['start', '--demo'], {
      env: { PORT: '0', ADMIN_PORT: '0', DEMO_UPSTREAM_PORT: String(demoPort) },
    });
    try {
      await cli.waitFor('Ctrl-C stops it.');
      const banner = cli.stderr();
      const withKey = /curl -i -u '([^']+):' (http:\S+)/.exec(banner)!;
      const withoutKey = /curl -i (http:\S+)/.exec(banner)!;
      const url = new URL(withKey[2]!);
      const ok = await request(url.origin, {
        path: url.pathname,
        headers: { authorization: basicAuth(withKey[1]!) },
      });
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.body)).toMatchObject({ id: 1, name: 'Rex' });
      const denied = await request(new URL(withoutKey[1]!).origin, {
        path: new URL(withoutKey[1]!).pathname,
      });
      expect(denied.status).toBe(401);
      // The quota at work: the banner's loop sees RateLimit count down, then a 429 with Retry-After.
      const loop =
        /for i in \$\(seq (\d+)\); do curl -s -D - -o \/dev\/null -u '([^']+):' (http:\S+) \|/.exec(banner)!;
      expect(loop, banner).not.toBeNull();
      const answers = [];
      for (let i = 0; i < Number(loop[1]); i += 1)
        answers.push(
          await request(url.origin, {
            path: new URL(loop[3]!).pathname,
            headers: { authorization: basicAuth(loop[2]!) },
          }),
        );
      // The 200 above took the first of the five calls.
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 429, 429]);
      expect(answers.map((answer) => /;r=(\d+);/.exec(String(answer.headers.ratelimit))?.[1])).toEqual([
        '3',
        '2',
        '1',
        '0',
        '0',
        '0',
      ]);
      expect(Number(answers.at(-1)!.headers['retry-after'])).toBeGreaterThan(0);
      // On a 429, t and Retry-After say the same wait; the README's sample of the loop is what it prints.
      for (const refused of answers.filter((answer) => answer.status === 429))
        expect(/;t=(\d+)$/.exec(String(refused.headers.ratelimit))?.[1]).toBe(refused.headers['retry-after']);
      const sample = readmeLoopSample();
      expect(sample.map(({ status, r }) => [status, r])).toEqual(
        answers.map((answer) => [answer.status, /;r=(\d+);/.exec(String(answer.headers.ratelimit))?.[1]]),
      );
      for (const refused of sample.filter(({ status }) => status === 429))
        expect(refused.retryAfter).toBe(refused.t);
      expect(banner).toContain('and in the console: Live usage');
      // It listens where the banner says, on this machine only: on 127.0.0.1, not on every interface.
      const listening = listeningAddresses(Number(url.port));
      expect(listening).toEqual(['0100007F']);
      expect(listeningAddresses(demoPort)).toEqual(['0100007F']);
    } finally {
      cli.child.kill('SIGTERM');
      expect((await cli.exited).code).toBe(0);
    }
  });
});
