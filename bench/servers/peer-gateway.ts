import { timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import gateway from 'fast-gateway';
import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';

// The Node peer doing the same job: fast-gateway (restana + fast-proxy-lite) with basic auth and two
// rate-limiter-flexible limits (requests, and bytes of the declared body), both fixed windows, in Redis,
// or in the process's memory when the Redis URL is `memory`.
const [port = '0', target = '', redisUrl = '', key = ''] = process.argv.slice(2);
const expected = Buffer.from(`Basic ${Buffer.from(`${key}:`).toString('base64')}`);
const redis = redisUrl === 'memory' ? null : new Redis(redisUrl, { enableOfflineQueue: false });
const limiter = (keyPrefix: string, points: number) =>
  redis
    ? new RateLimiterRedis({ storeClient: redis, keyPrefix, points, duration: 3600 })
    : new RateLimiterMemory({ keyPrefix, points, duration: 3600 });
const requests = limiter('peer-req', 1e9);
const bytes = limiter('peer-mb', 1e12);

type Next = (error?: unknown) => void;

async function authAndLimit(req: IncomingMessage, res: ServerResponse, next: Next): Promise<void> {
  const offered = Buffer.from(req.headers.authorization ?? '');
  if (offered.length !== expected.length || !timingSafeEqual(offered, expected)) {
    res.statusCode = 401;
    res.end('{"message":"Unauthorized"}');
    return;
  }
  try {
    await Promise.all([
      requests.consume('all', 1),
      bytes.consume('all', Number(req.headers['content-length'] ?? 0) + 1),
    ]);
    next();
  } catch {
    res.statusCode = 429;
    res.end('{"message":"Too Many Requests"}');
  }
}

const server = gateway({
  middlewares: [(req: IncomingMessage, res: ServerResponse, next: Next) => void authAndLimit(req, res, next)],
  routes: [{ prefix: '/pets', target, prefixRewrite: '/pets' }],
});
if (redis && redis.status !== 'ready') await once(redis, 'ready');
await server.start(Number(port), '127.0.0.1');
const address = server.getServer().address() as { port: number };
process.stdout.write(`listening ${address.port}\n`);
process.on('SIGTERM', () => {
  void server
    .close()
    .then(() => redis?.quit())
    .finally(() => process.exit(0));
});
