import { Redis } from 'ioredis';
import { cpuSeconds } from './cpu-time.js';

/** Totals of the bench's own redis-server so far: script calls served and CPU seconds used. */
export interface RedisReading {
  scriptCalls: number;
  /** User + system time of the redis-server process, from /proc (NaN where /proc cannot tell). */
  cpuSeconds: number;
}

/** What Redis spent on a piece of work, per request the load generator completed. */
export interface RedisCost {
  scriptCalls: number;
  cpuUs: number;
}

// EVAL, EVALSHA and FCALL and their read-only twins: every command that runs a script in one call.
const scriptCommand = /^cmdstat_(?:eval|evalsha|fcall)(?:_ro)?:calls=(\d+)/gm;

/**
 * Reads the bench's redis-server: script calls from INFO commandstats, CPU time from /proc/<pid>/stat.
 * Readings are totals; the work between two of them is their difference, so nothing is reset.
 */
export class RedisMeter {
  private readonly admin: Redis;

  constructor(
    url: string,
    private readonly pid: number,
  ) {
    // No reconnecting: once the bench stops its redis-server, a retrying client would keep the bench alive.
    this.admin = new Redis(url, { retryStrategy: () => null });
  }

  async read(): Promise<RedisReading> {
    const stats = await this.admin.info('commandstats');
    const scriptCalls = [...stats.matchAll(scriptCommand)].reduce((sum, match) => sum + Number(match[1]), 0);
    return { scriptCalls, cpuSeconds: cpuSeconds(this.pid) ?? NaN };
  }

  async close(): Promise<void> {
    await this.admin.quit();
  }
}

/** The difference of two readings, divided by the requests completed between them. */
export function costPerRequest(before: RedisReading, after: RedisReading, requests: number): RedisCost {
  const count = Math.max(1, requests);
  return {
    scriptCalls: (after.scriptCalls - before.scriptCalls) / count,
    cpuUs: ((after.cpuSeconds - before.cpuSeconds) * 1e6) / count,
  };
}
