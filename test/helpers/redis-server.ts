import { createConnection } from 'node:net';
import { dockerIsAvailable } from './docker.js';
import { freePort } from './free-port.js';
import { findExecutable, startServer } from './local-server.js';

export interface RedisService {
  url: string;
  stop(): Promise<void>;
}

/** Uses REDIS_URL if set, else a throwaway local redis-server, else a Docker container. */
export async function startRedis(): Promise<RedisService> {
  const url = process.env['REDIS_URL'];
  if (url) return { url, stop: async () => {} };
  const executable = await findExecutable('redis-server');
  if (executable) return startLocalRedis(executable);
  if (await dockerIsAvailable()) return startRedisContainer();
  throw new Error(
    'Redis for tests: set REDIS_URL, or install redis-server (apt-get install -y redis-server), or run a Docker engine',
  );
}

async function startLocalRedis(executable: string): Promise<RedisService> {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  const server = await startServer('redis-server', executable, args, () => answersPing(port));
  return { url: `redis://127.0.0.1:${port}`, stop: () => server.stop() };
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = '';
    const finish = (answered: boolean): void => {
      socket.destroy();
      resolve(answered);
    };
    socket.setTimeout(1_000, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) finish(reply.startsWith('+PONG'));
    });
  });
}

async function startRedisContainer(): Promise<RedisService> {
  const { GenericContainer } = await import('testcontainers');
  const container = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
  return {
    url: `redis://${container.getHost()}:${container.getMappedPort(6379)}`,
    stop: async () => {
      await container.stop();
    },
  };
}
