import { Redis } from 'ioredis';
import { afterAll, inject } from 'vitest';

/** Connections to the suite's Redis (global setup), each closed when the test file ends. */
export function suiteRedis(): () => Redis {
  const connections: Redis[] = [];
  afterAll(async () => {
    await Promise.all(connections.map((connection) => connection.quit()));
  });
  return () => {
    const connection = new Redis(inject('redisUrl'));
    connections.push(connection);
    return connection;
  };
}
