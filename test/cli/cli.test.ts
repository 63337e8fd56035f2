import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/run-cli.js';

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
