import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { hashPassword } from '../kit/password-hash.js';
import { exitCode, parseOptions, UsageError, type Command } from './command.js';

async function readPiped(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  return text.replace(/\r?\n$/, '');
}

function promptHidden(question: string): Promise<string> {
  process.stderr.write(question);
  const muted = new Writable({ write: (_chunk, _encoding, done) => done() });
  const rl = createInterface({ input: process.stdin, output: muted, terminal: true });
  return new Promise((resolve) =>
    rl.question('', (answer) => {
      rl.close();
      process.stderr.write('\n');
      resolve(answer);
    }),
  );
}

export const hashPasswordCommand: Command = {
  summary: 'hash an admin password for admin.users',
  help: `Usage: gateway hash-password

Reads a password (prompted without echo on a terminal, else from standard input) and prints its
scrypt hash for the \`password\` of an entry of admin.users. The password is never taken from the
command line, so it stays out of shell history and process lists.

Options:
  -h, --help   show this help`,
  async run(argv) {
    const { values } = parseOptions(argv, {});
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    const password = process.stdin.isTTY ? await promptHidden('Password: ') : await readPiped();
    if (password === '') throw new UsageError('the password must not be empty');
    process.stdout.write(`${await hashPassword(password)}\n`);
    return exitCode.ok;
  },
};
