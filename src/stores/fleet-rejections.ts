import type { Clock } from '../kit/clock.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { readLuaScript } from '../redis/lua-script.js';
import {
  rejectionBucketSeconds,
  rejectionBucketsKept,
  type RejectionHistory,
  type RestrictionRejections,
} from '../observe/rejection-history.js';

interface RejectionsScript {
  quotagateRejectionsAdd(key: string, ...args: string[]): Promise<number>;
}

const bucketMs = rejectionBucketSeconds * 1000;
/** A line nobody adds to is gone once it holds nothing of the kept span. */
const lineLifetimeMs = (rejectionBucketsKept + 1) * bucketMs;

/** One restriction's line; one hash tag per quota, so a reader's calls for a quota go to one node. */
const lineKey = (prefix: string, quotaId: string, index: number) =>
  `${prefix}rejections:{${quotaId}}:${index}`;

/**
 * The fleet's rejections of the first `restrictions` restrictions of a quota, as every gateway handed
 * them over (`FleetRejections`). Reading needs no history of its own: a primary of `workers: N` reads.
 */
export async function readFleetRejections(
  redis: RedisConnection,
  prefix: string,
  quotaId: string,
  restrictions: number,
): Promise<RestrictionRejections[]> {
  const lines = await Promise.all(
    Array.from({ length: restrictions }, (_unused, index) => redis.hgetall(lineKey(prefix, quotaId, index))),
  );
  return lines.flatMap((line, index) => {
    const buckets = Object.entries(line).map(([bucket, count]): [number, number] => [
      Number(bucket),
      Number(count),
    ]);
    return buckets.length > 0 ? [{ index, buckets }] : [];
  });
}

/**
 * The rejection history of a whole fleet on the shared Redis, so that the console of any gateway draws
 * the rejections of all of them: each gateway adds what its own history counted every few seconds (one
 * script call per restriction that rejected anything, never one per rejection), and before it answers
 * a reader, so its own count is never late. Another gateway's is at most `everyMs` late. One hash per
 * restriction, `<prefix>rejections:{<quota id>}:<index>`, bucket → count, kept five minutes.
 */
export class FleetRejections {
  private timer: unknown = null;
  private stopped = false;
  private readonly everyMs: number;

  constructor(
    private readonly redis: RedisConnection,
    private readonly prefix: string,
    private readonly history: RejectionHistory,
    private readonly options: { clock: Clock; everyMs?: number },
  ) {
    this.everyMs = options.everyMs ?? 5_000;
    redis.defineCommand('quotagateRejectionsAdd', {
      numberOfKeys: 1,
      lua: readLuaScript(import.meta.url, 'rejections-add'),
    });
  }

  start(): void {
    this.schedule();
  }

  /** Hands this gateway's new rejections to the fleet's lines; what fails is handed over next time. */
  async flush(): Promise<void> {
    const unsent = this.history.takeUnsent();
    if (unsent.length === 0) return;
    const oldest = String(this.history.oldestKept());
    const script = this.redis as unknown as RejectionsScript;
    const results = await Promise.allSettled(
      unsent.map(({ quotaId, index, buckets }) =>
        script.quotagateRejectionsAdd(
          lineKey(this.prefix, quotaId, index),
          oldest,
          String(lineLifetimeMs),
          ...buckets.flatMap(([bucket, count]) => [String(bucket), String(count)]),
        ),
      ),
    );
    this.history.giveBack(unsent.filter((_line, i) => results[i]!.status === 'rejected'));
  }

  /** The fleet's rejections of the first `restrictions` restrictions of a quota. */
  ofQuota(quotaId: string, restrictions: number): Promise<RestrictionRejections[]> {
    return readFleetRejections(this.redis, this.prefix, quotaId, restrictions);
  }

  /** Stops the timer and hands over what is left. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) this.options.clock.clearTimeout(this.timer);
    await this.flush().catch(() => undefined);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.options.clock.setTimeout(() => {
      this.flush()
        .catch(() => undefined)
        .finally(() => this.schedule());
    }, this.everyMs);
  }
}
