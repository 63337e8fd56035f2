#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { checkConfigCommand } from './commands/check-config-command.js';
import { configSchemaCommand } from './commands/config-schema-command.js';
import { exitCode, UsageError, type Command } from './commands/command.js';
import { hashPasswordCommand } from './commands/hash-password-command.js';
import { initCommand } from './commands/init-command.js';
import { quotasCommand } from './commands/quotas-command.js';
import { reloadCommand } from './commands/reload-command.js';
import { startCommand } from './commands/start-command.js';
import { usageCommand } from './commands/usage-command.js';
import { ConfigError } from './kit/config-error.js';
import { didYouMean } from './kit/key-suggestions.js';
import { ScaffoldConflictError } from './init/scaffold-project.js';

const commands: Record<string, Command> = {
  init: initCommand,
  start: startCommand,
  reload: reloadCommand,
  'check-config': checkConfigCommand,
  'config-schema': configSchemaCommand,
  quotas: quotasCommand,
  usage: usageCommand,
  'hash-password': hashPasswordCommand,
};

const usage = `Usage: gateway <command> [options]

Commands:
${Object.entries(commands)
  .map(([name, command]) => `  ${name.padEnd(15)}${command.summary}`)
  .join('\n')}

Run \`gateway <command> --help\` for the options of a command, \`gateway --version\` for the version.`;

/** The version of the package this CLI was built from (dist/cli.js sits beside package.json's folder). */
function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return manifest.version;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${usage}\n`);
    return name === undefined ? exitCode.usage : exitCode.ok;
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    process.stdout.write(`quotagate ${packageVersion()}\n`);
    return exitCode.ok;
  }
  const command = commands[name];
  if (!command) {
    const meant = didYouMean(name, Object.keys(commands));
    process.stderr.write(`gateway: unknown command '${name}'${meant}\n\n${usage}\n`);
    return exitCode.usage;
  }
  try {
    return await command.run(rest);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.problems.join('\n')}\n`);
      return exitCode.usage;
    }
    if (error instanceof UsageError || error instanceof ScaffoldConflictError) {
      process.stderr.write(`gateway ${name}: ${error.message}\n`);
      return exitCode.usage;
    }
    process.stderr.write(`gateway ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
    return exitCode.failure;
  }
}

/** Resolves once everything written to `stream` so far has left the process (a pipe may lag behind). */
const flushed = (stream: NodeJS.WriteStream) =>
  new Promise<void>((resolve) => stream.write('', () => resolve()));

// A reader that closed the pipe early (`gateway config-schema | head -c 100`) has what it wanted: the
// command ends quietly, as Unix tools do, instead of dying on an unhandled EPIPE with a stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(exitCode.ok);
});

const code = await main(process.argv.slice(2));
// process.exit drops what a pipe has not taken yet: `gateway quotas export | …` must get all of it.
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
process.exit(code);
