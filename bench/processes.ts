import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';

export interface Running {
  child: ChildProcess;
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once `check` holds, polling every 50 ms for at most 15 s. */
export async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what} did not come up within 15 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** True when something accepts TCP connections on the port. */
export function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Starts a process (no shell: its pid is the server's) and waits until `ready` holds; stop() kills by pid. */
export async function start(
  what: string,
  command: string,
  args: string[],
  ready: () => Promise<boolean>,
  env: NodeJS.ProcessEnv = {},
): Promise<Running> {
  const child = spawn(command, args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += String(chunk)));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    // A process stopped by SIGSTOP (the accuracy bench's frozen Redis) acts on SIGTERM only once continued.
    child.kill('SIGCONT');
    const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(force);
  };
  try {
    await until(async () => {
      if (child.exitCode !== null) throw new Error(`${what} exited: ${stderr}`);
      return ready();
    }, what);
  } catch (error) {
    await stop();
    throw error;
  }
  return { child, stop };
}

/**
 * Runs a bench's `main`, then `stop` (which stops every server it started, by pid) however it ends; on
 * Ctrl-C or SIGTERM, `stop` runs before the bench exits with 130.
 */
export async function runThenStop(
  main: () => Promise<void>,
  stop: () => Promise<void>,
  say: (line: string) => void,
): Promise<void> {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      say(`${signal}: stopping the bench servers`);
      void stop().finally(() => process.exit(130));
    });
  }
  try {
    await main();
  } finally {
    await stop();
  }
}
