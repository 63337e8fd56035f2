import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePorts } from './free-port.js';
import { findExecutable } from './local-server.js';
import { askRedis } from './redis-process.js';

export interface RedisCluster {
  urls: string[];
  stop(): Promise<void>;
}

export async function clusterTools(): Promise<{ server: string; cli: string } | null> {
  const [server, cli] = await Promise.all([findExecutable('redis-server'), findExecutable('redis-cli')]);
  return server && cli ? { server, cli } : null;
}

const clusterState = (port: number) =>
  askRedis(
    port,
    async (client) => /cluster_state:(\w+)/.exec(await client.cluster('INFO'))?.[1] ?? 'unknown',
    'down',
  );

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`redis cluster: ${what} within 15 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Three local masters (`--cluster-enabled yes`) joined by `redis-cli --cluster create`. Each node's bus
 * port is a free port of its own: Redis's default, the node's port + 10000, is past 65535 for the top
 * fifth of the ephemeral range (a node on 55536 or above refuses to start) and may be taken.
 */
export async function startRedisCluster(tools: { server: string; cli: string }): Promise<RedisCluster> {
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-cluster-'));
  const free = await freePorts(6);
  const [ports, busPorts] = [free.slice(0, 3), free.slice(3)];
  const children: ChildProcess[] = ports.map((port, i) =>
    spawn(
      tools.server,
      [
        '--port',
        String(port),
        '--cluster-port',
        String(busPorts[i]),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    ),
  );
  const stop = async () => {
    await Promise.all(
      children.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        await exited;
      }),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports)
      await until(async () => (await clusterState(port)) !== 'down', `node ${port} did not start`);
    await promisify(execFile)(tools.cli, [
      '--cluster',
      'create',
      ...ports.map((port) => `127.0.0.1:${port}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    for (const port of ports)
      await until(async () => (await clusterState(port)) === 'ok', `node ${port} did not join`);
  } catch (error) {
    await stop();
    throw error;
  }
  return { urls: ports.map((port) => `redis://127.0.0.1:${port}`), stop };
}
