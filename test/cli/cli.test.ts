import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observe/log.js';
import { hashPassword, verifyPassword } from '../../src/kit/password-hash.js';
import { FileQuotaRepository } from '../../src/quota/file-quota-repository.js';
import { request } from '../helpers/raw-http.js';
import { runCli, spawnCli, startedPorts } from '../helpers/run-cli.js';
import { basicAuth, devKey, petsConfig, userAuth, writeConfigDir } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { freePort } from '../support/free-port.js';

/** The local addresses sockets listen on at `port`, as /proc/net/tcp and tcp6 write them (hex). */
function listeningAddresses(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((table) =>
    readFileSync(table, 'utf8')
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((fields) => fields[3] === '0A' && fields[1]?.endsWith(`:${hexPort}`))
      .map((fields) => fields[1]!.split(':')[0]!),
  );
}

const tempDirs: string[] = [];

const tempDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-cli-'));
  tempDirs.push(dir);
  return dir;
};

afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

describe('gateway (no command)', () => {
  it('prints the commands with --help and exits 0', async () => {
    const result = await runCli(['--help']);
    expect(result.code).toBe(0);
    for (const command of ['init', 'start', 'check-config', 'hash-password'])
      expect(result.stdout).toContain(command);
  });

  it('prints the version of the package with --version and exits 0', async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    for (const flag of ['--version', '-v']) {
      const result = await runCli([flag]);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(`quotagate ${version}\n`);
    }
  });

  it('exits 2 without a command and 2 for an unknown one', async () => {
    expect((await runCli([])).code).toBe(2);
    const unknown = await runCli(['serve']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'serve'");
  });

  it.each(['init', 'start', 'check-config', 'hash-password'])(
    'prints help for %s and exits 0',
    async (command) => {
      const result = await runCli([command, '--help']);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain(`Usage: gateway ${command}`);
    },
  );

  it('exits 2 on an unknown option', async () => {
    const result = await runCli(['start', '--config-dri', 'conf']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("Unknown option '--config-dri'");
  });
});

describe('gateway init', () => {
  const keysOf = (file: string) => {
    const text = readFileSync(file, 'utf8');
    return {
      development: /apikey_development: '([^']+)'/.exec(text)?.[1] ?? '',
      production: /apikey_production: '([^']+)'/.exec(text)?.[1] ?? '',
      text,
    };
  };

  it('scaffolds conf/default.js with basic auth, fresh distinct keys of 32 random bytes, and a .gitignore', async () => {
    const dir = tempDir();
    const result = await runCli(['init', dir]);
    expect(result.code).toBe(0);
    const { development, production, text } = keysOf(path.join(dir, 'conf/default.js'));
    expect(text).toContain("APIKeyAuthType: 'basic'");
    expect(Buffer.from(development, 'base64url')).toHaveLength(32);
    expect(Buffer.from(production, 'base64url')).toHaveLength(32);
    expect(development).not.toBe(production);
    const gitignore = readFileSync(path.join(dir, '.gitignore'), 'utf8');
    for (const line of ['data/', 'conf/tls/', 'conf/production.*', '.env', '*.pem'])
      expect(gitignore).toContain(line);
  });

  it('prints commands that work where it was run: start, and hash-password for the first admin user', async () => {
    const dir = tempDir();
    const result = await runCli(['init', dir]);
    const lines = result.stdout.split('\n');
    const cliFromDir = path.relative(dir, path.resolve('dist/cli.js'));
    const cd = `cd ${path.relative(process.cwd(), dir)} && `;
    expect(lines).toContain(`  ${cd}node ${cliFromDir} start`);
    expect(result.stdout).toContain('has no user yet');
    expect(result.stdout).toContain("role: 'admin'");
    // The printed hash-password line, run by a shell from where init ran, hashes what it is given.
    const hashLine = lines.find((line) => line.endsWith(' hash-password'))!.trim();
    const hashed = await new Promise<string>((resolve, reject) => {
      const shell = spawn('sh', ['-c', hashLine], { stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      shell.stdout.on('data', (chunk: Buffer) => (out += String(chunk)));
      shell.on('error', reject);
      shell.on('close', () => resolve(out.trim()));
      shell.stdin.end('first admin password\n');
    });
    expect(await verifyPassword('first admin password', hashed)).toBe(true);
  });

  it('generates different keys on every run', async () => {
    const [a, b] = [tempDir(), tempDir()];
    await runCli(['init', a]);
    await runCli(['init', b]);
    expect(keysOf(path.join(a, 'conf/default.js')).development).not.toBe(
      keysOf(path.join(b, 'conf/default.js')).development,
    );
  });

  it('writes a config that check-config accepts', async () => {
    const dir = tempDir();
    await runCli(['init', dir]);
    const result = await runCli(['check-config'], { cwd: dir });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      'config ok (development): 1 APIs, 0 applications, APIKeyAuthType basic, store memory',
    );
  });

  it('never overwrites an existing config (exit 2)', async () => {
    const dir = tempDir();
    await runCli(['init', dir]);
    const before = readFileSync(path.join(dir, 'conf/default.js'), 'utf8');
    const again = await runCli(['init', dir]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('already exists; nothing was changed');
    expect(readFileSync(path.join(dir, 'conf/default.js'), 'utf8')).toBe(before);
  });

  it('writes default.cjs in an ESM package, and keeps existing .gitignore lines', async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
    writeFileSync(path.join(dir, '.gitignore'), 'build/\ndata/');
    expect((await runCli(['init', dir])).code).toBe(0);
    expect(readFileSync(path.join(dir, 'conf/default.cjs'), 'utf8')).toContain('module.exports');
    const gitignore = readFileSync(path.join(dir, '.gitignore'), 'utf8').split('\n');
    expect(gitignore.slice(0, 3)).toEqual(['build/', 'data/', 'node_modules/']);
    expect(gitignore.filter((line) => line === 'data/')).toHaveLength(1);
    expect((await runCli(['check-config'], { cwd: dir })).code).toBe(0);
  });
});

describe('gateway check-config', () => {
  it('exits 2 naming file, key and reason, without a stack trace', async () => {
    const result = await runCli([
      'check-config',
      '--config-dir',
      'test/fixtures/bad-config/upstream-not-http',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'test/fixtures/bad-config/upstream-not-http/default.mjs: apis[1].upstream: must be an http(s) URL\n',
    );
  });

  it("reports Node's SyntaxError for a config that does not parse, with the line and column", async () => {
    const result = await runCli(['check-config', '--config-dir', 'test/fixtures/bad-config/syntax-error']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /^test\/fixtures\/bad-config\/syntax-error\/default\.mjs: line 2, column 1: cannot load: SyntaxError: Unexpected end of input\n$/,
    );
  });

  it.each([
    [
      'plugin-file-missing',
      /^APIKeyAuthPlugin: cannot load '\.\/test\/fixtures\/plugins\/no-such-plugin\.js': Cannot find module/,
    ],
    [
      'plugin-constructor-fails',
      /^APIKeyAuthPlugin: constructing '\.\/test\/fixtures\/plugins\/failing-constructor\.js' failed: missing settings\n$/,
    ],
  ])('refuses %s with exit 2, as start does', async (fixture, problem) => {
    const dir = `test/fixtures/bad-config/${fixture}`;
    const checked = await runCli(['check-config', '--config-dir', dir]);
    expect(checked.code).toBe(2);
    expect(checked.stderr).toMatch(problem);
    expect(checked.stdout).not.toContain('config ok');
    const started = await runCli(['start', '--config-dir', dir], { env: { PORT: '0', ADMIN_PORT: '0' } });
    expect(started.code).toBe(2);
    expect(started.stderr).toBe(checked.stderr);
  });

  it('refuses an unknown top-level key (a misspelt port) with exit 2', async () => {
    const result = await runCli([
      'check-config',
      '--config-dir',
      'test/fixtures/bad-config/top-level-key-unknown',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'test/fixtures/bad-config/top-level-key-unknown/default.mjs: prot: unknown key (did you mean port?)\n',
    );
  });
});

describe('gateway hash-password', () => {
  it('prints an scrypt hash of the password read from standard input', async () => {
    const result = await runCli(['hash-password'], { input: 'correct horse\n' });
    expect(result.code).toBe(0);
    const hash = result.stdout.trim();
    expect(hash).toMatch(/^scrypt\$16384\$8\$1\$[\w-]+\$[\w-]+$/);
    expect(hash).not.toContain('correct horse');
    expect(await verifyPassword('correct horse', hash)).toBe(true);
    expect(await verifyPassword('wrong horse', hash)).toBe(false);
  });

  it('refuses an empty password with exit 2', async () => {
    const result = await runCli(['hash-password'], { input: '\n' });
    expect(result.code).toBe(2);
  });
});

describe('gateway start', () => {
  let upstream: TestUpstream;
  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      const delay = req.url?.includes('slow') ? 600 : 0;
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(`done ${req.url}`);
      }, delay);
    });
  });
  afterAll(() => upstream.close());

  it('proxies a one-API config and answers a missing key with the exact 401 body', async () => {
    const dir = writeConfigDir(petsConfig(upstream.url));
    tempDirs.push(dir);
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
    tempDirs.push(dir);
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

  it('exits 0 on SIGTERM after letting an in-flight request finish', async () => {
    const dir = writeConfigDir(petsConfig(upstream.url, { shutdownTimeout: 5000 }));
    tempDirs.push(dir);
    const cli = spawnCli(['start', '--config-dir', dir]);
    const ports = await startedPorts(cli);
    const inFlight = request(`http://127.0.0.1:${ports.http}`, {
      path: '/pets/slow',
      headers: { authorization: basicAuth(devKey) },
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    const signalledAt = Date.now();
    cli.child.kill('SIGTERM');
    const [response, result] = await Promise.all([inFlight, cli.exited]);
    expect(response).toMatchObject({ status: 200, body: 'done /slow' });
    expect(response.headers.connection).toBe('close');
    expect(result.code).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(5000);
    expect(result.stdout).toContain('"msg":"gateway stopped"');
  });

  it('closes requests still open at the end of the grace period and exits 0', async () => {
    const hung = await startUpstream(() => undefined);
    const dir = writeConfigDir(petsConfig(hung.url, { shutdownTimeout: 300 }));
    tempDirs.push(dir);
    const cli = spawnCli(['start', '--config-dir', dir]);
    const ports = await startedPorts(cli);
    const stuck = new Promise<string>((resolve) => {
      http
        .get(`http://127.0.0.1:${ports.http}/pets/1`, { headers: { authorization: basicAuth(devKey) } }, () =>
          resolve('answered'),
        )
        .on('error', () => resolve('closed'));
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    cli.child.kill('SIGTERM');
    const result = await cli.exited;
    expect(result.code).toBe(0);
    expect(await stuck).toBe('closed');
    expect(result.stdout).toContain('grace period over');
    await hung.close();
  });

  it('exits 1 with a message when its port is taken', async () => {
    const dir = writeConfigDir(petsConfig(upstream.url, { port: upstream.port }));
    tempDirs.push(dir);
    const result = await runCli(['start', '--config-dir', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('EADDRINUSE');
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('exits 2 on a bad config', async () => {
    const result = await runCli(['start', '--config-dir', 'test/fixtures/bad-config/port-out-of-range']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'test/fixtures/bad-config/port-out-of-range/default.mjs: port: must be an integer from 0 to 65535\n',
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
    const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-store-'));
    tempDirs.push(dir);
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
    tempDirs.push(dir);
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
