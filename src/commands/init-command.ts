import path from 'node:path';
import { scaffoldProject } from '../init/scaffold-project.js';
import { exitCode, parseOptions, UsageError, type Command } from './command.js';

/** A path as one shell word: quoted when it holds white space. */
const shellWord = (text: string): string => (/\s/.test(text) ? JSON.stringify(text) : text);

/**
 * This CLI as it can be run again from `dir`: `gateway` when it ran as a bin on PATH, `npx gateway` as
 * a project's local bin, else `node` and the path from `dir` to the script (a clone has no bin on PATH).
 */
function cliFrom(dir: string): string {
  const script = process.argv[1] ?? '';
  if (path.basename(script) === 'gateway') {
    return path.basename(path.dirname(script)) === '.bin' ? 'npx gateway' : 'gateway';
  }
  const relative = path.relative(dir, script) || script;
  return `node ${shellWord(relative)}`;
}

export const initCommand: Command = {
  summary: 'scaffold a new project (conf/default.js with fresh keys, .gitignore)',
  help: `Usage: gateway init [DIR]

Creates DIR/conf/default.js (default.cjs in an ESM package) with APIKeyAuthType 'basic', freshly
generated apikey_development and apikey_production, and an example API; adds to DIR/.gitignore the
lines that keep secrets and data out of git. DIR defaults to the current folder. An existing config
is never overwritten. Prints how to start it and how to add an admin user, as commands that work
where init was run.

Options:
  -h, --help   show this help`,
  async run(argv) {
    const { values, positionals } = parseOptions(argv, {}, true);
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    if (positionals.length > 1) throw new UsageError('init takes at most one folder');
    const dir = path.resolve(positionals[0] ?? '.');
    const written = scaffoldProject(dir);
    for (const file of written) process.stdout.write(`wrote ${path.relative(process.cwd(), file) || file}\n`);
    const into = path.relative(process.cwd(), dir);
    const cd = into ? `cd ${shellWord(into)} && ` : '';
    const cli = cliFrom(dir);
    process.stdout.write(
      [
        'next:',
        `  ${cd}${cli} start`,
        'the admin API (the Quota API, on 127.0.0.1:8081) has no user yet: hash a password with',
        `  ${cd}${cli} hash-password`,
        "and add { username: 'admin', password: '<the hash>', role: 'admin' } to admin.users of the config",
        '',
      ].join('\n'),
    );
    return exitCode.ok;
  },
};
