import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/run-cli.js';

const commandNames = ['init', 'start', 'reload', 'check-config', 'config-schema', 'quotas', 'hash-password'];

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

  it('names the command a misspelt one most likely is', async () => {
    const result = await runCli(['strat']);
    expect(result.code).toBe(2);
    expect(result.stderr.split('\n')[0]).toBe("gateway: unknown command 'strat' (did you mean start?)");
  });

  it('names the option a misspelt one most likely is', async () => {
    const result = await runCli(['start', '--config-dri', 'conf']);
    expect(result.stderr).toBe("gateway start: Unknown option '--config-dri' (did you mean --config-dir?)\n");
  });

  it.each(commandNames)('%s --help: the usage line names every option the help lists', async (command) => {
    const { stdout } = await runCli([command, '--help']);
    const usage = stdout.slice(0, stdout.indexOf('\n\n'));
    const listed = [...stdout.matchAll(/^ {2}(?:-\w, )?(--[\w-]+)/gm)].map(([, option]) => option!);
    expect(usage).toMatch(new RegExp(`^Usage: gateway ${command}`));
    expect(listed.filter((option) => option !== '--help' && !usage.includes(option))).toEqual([]);
  });
});
