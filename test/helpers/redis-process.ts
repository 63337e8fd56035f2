import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { findExecutable } from './local-server.js';
import { freePort } from './free-port.js';

/** A redis-server of a test's own, which the test may pause, kill and start again on the same port. */
export interface RedisProcess {
  url: string;
  port: number;
  /** SIGSTOP / SIGCONT the server: it keeps its connections but answers nothing. */
  pause(): void;
  resume(): void;
  /** SIGKILL: no shutdown, no final save. */
  kill(): Promise<void>;
  /**
   * Starts it again on the same port and folder: its append-only file brings the data back, unless
   * `empty` (after kill()) deletes the folder's files first, as a Redis that lost its disk.
   */
  restart(options?: { empty?: boolean }): Promise<void>;
  stop(): Promise<void>;
}

export const redisServerPath = () => findExecutable('redis-server');

/**
 * Asks the redis-server on `port` one question on a throwaway connection that never retries;
 * `unanswered` when it cannot be reached.
 */
export async function askRedis<T>(
  port: number,
  question: (client: Redis) => Promise<T>,
  unanswered: T,
): Promise<T> {
  const client = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await question(client);
  } catch {
    return unanswered;
  } finally {
    client.disconnect();
  }
}

const answers = (port: number) => askRedis(port, async (client) => (await client.ping()) === 'PONG', false);

/** Starts a redis-server with an fsync-always append-only file, so that a SIGKILL loses nothing. */
export async function startRedisProcess(executable: string): Promise<RedisProcess> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-redis-'));
  let child: ChildProcess;
  const launch = async () => {
    child = spawn(
      executable,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
      ],
      { stdio: 'ignore' },
    );
    const deadline = Date.now() + 10_000;
    while (!(await answers(port))) {
      if (Date.now() > deadline) throw new Error('redis-server did not start');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    kill,
    async restart({ empty = false } = {}) {
      if (empty) {
        rmSync(dir, { recursive: true, force: true });
        mkdirSync(dir);
      }
      await launch();
    },
    async stop() {
      child.kill('SIGCONT');
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
