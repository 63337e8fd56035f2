import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/kit/password-hash.js';
import { runCli } from '../helpers/run-cli.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

const tempDirs = useTempDirs('quotagate-cli-');

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
    const dir = tempDirs.make();
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
    const dir = tempDirs.make();
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
    const [a, b] = [tempDirs.make(), tempDirs.make()];
    await runCli(['init', a]);
    await runCli(['init', b]);
    expect(keysOf(path.join(a, 'conf/default.js')).development).not.toBe(
      keysOf(path.join(b, 'conf/default.js')).development,
    );
  });

  it('writes a config that check-config accepts', async () => {
    const dir = tempDirs.make();
    await runCli(['init', dir]);
    const result = await runCli(['check-config'], { cwd: dir });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      'config ok (development): 1 APIs, 0 applications, APIKeyAuthType basic, store memory',
    );
  });

  it('never overwrites an existing config (exit 2)', async () => {
    const dir = tempDirs.make();
    await runCli(['init', dir]);
    const before = readFileSync(path.join(dir, 'conf/default.js'), 'utf8');
    const again = await runCli(['init', dir]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('already exists; nothing was changed');
    expect(readFileSync(path.join(dir, 'conf/default.js'), 'utf8')).toBe(before);
  });

  it('writes default.cjs in an ESM package, and keeps existing .gitignore lines', async () => {
    const dir = tempDirs.make();
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
