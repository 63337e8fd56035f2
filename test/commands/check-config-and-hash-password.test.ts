import { describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/kit/password-hash.js';
import { runCli } from '../helpers/run-cli.js';

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
    [
      'usage-path-in-catalog',
      /^usagePath: '\/store\/inventory' is a path of API 'Store' \(GET, its method 'getInventory'\): choose another path, or false\n$/,
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
