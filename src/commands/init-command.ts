import path from 'node:path';
import { scaffoldProject } from '../init/scaffold-project.js';
import { exitCode, parseOptions, UsageError, type Command } from './command.js';

export const initCommand: Command = {
  summary: 'scaffold a new project (conf/default.js with fresh keys, .gitignore)',
  help: `Usage: gateway init [DIR]

Creates DIR/conf/default.js (default.cjs in an ESM package) with APIKeyAuthType 'basic', freshly
generated apikey_development and apikey_production, and an example API; adds to DIR/.gitignore the
lines that keep secrets and data out of git. DIR defaults to the current folder. An existing config
is never overwritten.

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
    process.stdout.write(`next: cd ${path.relative(process.cwd(), dir) || '.'} && gateway start\n`);
    return exitCode.ok;
  },
};
