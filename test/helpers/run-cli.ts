import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const cliPath = path.resolve('dist/cli.js');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once stderr or stdout contains `text`. */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
  exited: Promise<CliResult>;
}

/** Runs the built CLI (`dist/cli.js`) as a child process. */
export function spawnCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {},
): CliProcess {
  const child = spawn(process.execPath, [cliPath, ...args], {
    cwd: options.cwd ?? process.cwd(),
    env: { PATH: process.env.PATH, LOG_LEVEL: 'info', ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const listeners = new Set<() => void>();
  child.stdout!.on('data', (chunk) => {
    stdout += String(chunk);
    for (const listener of listeners) listener();
  });
  child.stderr!.on('data', (chunk) => {
    stderr += String(chunk);
    for (const listener of listeners) listener();
  });
  child.stdin!.end(options.input ?? '');
  const exited = new Promise<CliResult>((resolve) =>
    child.on('exit', (code, signal) => {
      for (const listener of listeners) listener();
      resolve({ code, signal, stdout, stderr });
    }),
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitFor(text, timeoutMs = 10_000) {
      const found = () =>
        typeof text === 'string' ? (stdout + stderr).includes(text) : text.test(stdout + stderr);
      return new Promise((resolve, reject) => {
        const check = () => {
          if (found()) {
            done();
            resolve();
          } else if (child.exitCode !== null) {
            done();
            reject(new Error(`exited before printing ${String(text)}\nstdout: ${stdout}\nstderr: ${stderr}`));
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`timed out waiting for ${String(text)}\nstdout: ${stdout}\nstderr: ${stderr}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
  };
}

/** Runs the CLI to completion. */
export function runCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {},
) {
  return spawnCli(args, options).exited;
}

export interface StartedPorts {
  http: number;
  admin: number;
  https?: number;
}

/** Waits for a started gateway's "gateway started" log line and answers the ports it bound. */
export async function startedPorts(cli: CliProcess, timeoutMs = 10_000): Promise<StartedPorts> {
  await cli.waitFor('"msg":"gateway started"', timeoutMs);
  const line = cli
    .stdout()
    .split('\n')
    .find((text) => text.includes('"msg":"gateway started"'))!;
  return (JSON.parse(line) as { ports: StartedPorts }).ports;
}
