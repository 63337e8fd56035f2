import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { access, constants } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const READY_TIMEOUT_MS = 10_000;
const POLL_INTERVAL_MS = 100;
const STOP_GRACE_MS = 5_000;

// Server binaries such as slapd live in sbin, which is often missing from a non-root PATH.
const SBIN_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin'];

export interface ServerProcess {
  stop(): Promise<void>;
}

export async function findExecutable(name: string): Promise<string | undefined> {
  const dirs = [...(process.env['PATH'] ?? '').split(delimiter), ...SBIN_DIRS].filter(Boolean);
  for (const dir of dirs) {
    const candidate = join(dir, name);
    if (await isExecutable(candidate)) return candidate;
  }
  return undefined;
}

async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Spawns a server that stays in the foreground (no shell, so the child's pid is the server's)
 * and resolves once `isReady` holds. On failure the server is stopped and the error carries its
 * output.
 */
export async function startServer(
  name: string,
  executable: string,
  args: readonly string[],
  isReady: () => Promise<boolean>,
): Promise<ServerProcess> {
  const child = spawn(executable, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk: Buffer): void => {
    output += chunk.toString();
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  // 'close' rather than 'exit': it comes after the last output has been read.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  await once(child, 'spawn');
  child.on('error', (error) => collect(Buffer.from(`${error.message}\n`)));
  const stop = (): Promise<void> => stopChild(child, closed);
  try {
    await waitUntilReady(name, isReady, () => child.exitCode !== null || child.signalCode !== null);
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}. Its output:\n${output}`);
  }
  return { stop };
}

async function stopChild(child: ChildProcess, closed: Promise<void>): Promise<void> {
  child.kill('SIGTERM');
  const escalation = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await closed;
  clearTimeout(escalation);
}

/** Polls `isReady` for up to 10 s, giving up early once `hasExited` holds. */
export async function waitUntilReady(
  name: string,
  isReady: () => Promise<boolean>,
  hasExited: () => boolean = () => false,
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (hasExited()) throw new Error(`${name} exited before it was ready`);
    if (await isReady()) return;
    await sleep(POLL_INTERVAL_MS);
  }
  throw new Error(`${name} did not become ready within ${READY_TIMEOUT_MS / 1000} s`);
}
