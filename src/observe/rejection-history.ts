/** Width of one bucket of the rejection history, in seconds. */
export const rejectionBucketSeconds = 10;
/** Buckets kept: five minutes, the span of the console's sparklines. */
export const rejectionBucketsKept = 30;
const bucketMs = rejectionBucketSeconds * 1000;
/** Restrictions tracked before those without a rejection in the kept span are swept. */
const sweepAbove = 10_000;

/** A restriction's rejections per bucket (bucket = ms since the epoch ÷ bucket width), newest last. */
export interface RestrictionRejections {
  index: number;
  buckets: Array<[bucket: number, count: number]>;
}

/**
 * The recent rejections of the first `restrictions` restrictions of a quota, as histories to add up:
 * the fleet's, and those of processes that have not handed theirs to it.
 */
export type RejectionSource = (
  quotaId: string,
  restrictions: number,
) => Promise<ReadonlyArray<readonly RestrictionRejections[]>>;

/** A restriction's rejections per bucket, named by quota and index: what a process hands to the fleet. */
export interface RejectionCounts extends RestrictionRejections {
  quotaId: string;
}

const lineKey = (quotaId: string, index: number) => `${quotaId}#${index}`;

/**
 * Requests each restriction rejected over the last five minutes, in ten-second buckets, for the
 * console's sparklines. Kept per process (each worker of `workers: N` its own; the admin listener adds
 * them up by bucket, which is the same wall-clock interval in every process). Only rejections are
 * recorded, so an admitted request costs nothing here.
 */
export class RejectionHistory {
  /** Per quota id, per restriction index: rejections per bucket. No string is built per rejection. */
  private readonly quotas = new Map<string, Array<Map<number, number> | undefined>>();
  private lines = 0;
  /** Per line (`lineKey`), per bucket: the count already handed over to the fleet's store. */
  private readonly sent = new Map<string, Map<number, number>>();

  constructor(private readonly now: () => number = Date.now) {}

  record(quotaId: string, index: number): void {
    const bucket = Math.floor(this.now() / bucketMs);
    let restrictions = this.quotas.get(quotaId);
    if (!restrictions) {
      restrictions = [];
      this.quotas.set(quotaId, restrictions);
    }
    let line = restrictions[index];
    if (!line) {
      // Quotas deleted or rewritten leave lines behind: swept once there are many.
      if (this.lines >= sweepAbove) this.sweep(bucket);
      line = new Map();
      restrictions[index] = line;
      this.lines += 1;
    }
    const count = line.get(bucket);
    if (count !== undefined) {
      line.set(bucket, count + 1);
      return;
    }
    // A new bucket: those that left the kept span go, so a line holds at most the span.
    for (const kept of line.keys()) if (kept <= bucket - rejectionBucketsKept) line.delete(kept);
    line.set(bucket, 1);
  }

  /** The oldest bucket of the kept span, by this history's clock. */
  oldestKept(): number {
    return Math.floor(this.now() / bucketMs) - rejectionBucketsKept + 1;
  }

  /** The kept rejections of every restriction of a quota. */
  ofQuota(quotaId: string): RestrictionRejections[] {
    const oldest = this.oldestKept();
    const found: RestrictionRejections[] = [];
    (this.quotas.get(quotaId) ?? []).forEach((line, index) => {
      const buckets = [...(line ?? [])].filter(([bucket]) => bucket >= oldest);
      if (buckets.length > 0) found.push({ index, buckets });
    });
    return found;
  }

  /**
   * The rejections not yet handed over, per line and bucket of the kept span, now counted as handed
   * over (for the fleet's store, `FleetRejections`); `giveBack` undoes it when the hand-over failed.
   */
  takeUnsent(): RejectionCounts[] {
    const oldest = this.oldestKept();
    const unsent: RejectionCounts[] = [];
    for (const [quotaId, restrictions] of this.quotas) {
      restrictions.forEach((line, index) => {
        if (!line) return;
        const key = lineKey(quotaId, index);
        let sent = this.sent.get(key);
        const buckets: Array<[number, number]> = [];
        for (const [bucket, count] of line) {
          if (bucket < oldest) continue;
          const before = sent?.get(bucket) ?? 0;
          if (count <= before) continue;
          buckets.push([bucket, count - before]);
          sent ??= new Map();
          sent.set(bucket, count);
        }
        if (sent) {
          for (const bucket of sent.keys()) if (bucket < oldest) sent.delete(bucket);
          if (sent.size === 0) this.sent.delete(key);
          else this.sent.set(key, sent);
        }
        if (buckets.length > 0) unsent.push({ quotaId, index, buckets });
      });
    }
    return unsent;
  }

  /** Counts taken by `takeUnsent` that did not reach the fleet's store: they are handed over next time. */
  giveBack(unsent: readonly RejectionCounts[]): void {
    for (const { quotaId, index, buckets } of unsent) {
      const sent = this.sent.get(lineKey(quotaId, index));
      if (!sent) continue;
      for (const [bucket, count] of buckets) {
        const left = (sent.get(bucket) ?? 0) - count;
        if (left > 0) sent.set(bucket, left);
        else sent.delete(bucket);
      }
    }
  }

  private sweep(bucket: number): void {
    const oldest = bucket - rejectionBucketsKept + 1;
    this.lines = 0;
    for (const [quotaId, restrictions] of this.quotas) {
      restrictions.forEach((line, index) => {
        if (!line) return;
        for (const kept of line.keys()) if (kept < oldest) line.delete(kept);
        if (line.size === 0) restrictions[index] = undefined;
        else this.lines += 1;
      });
      if (restrictions.every((line) => line === undefined)) this.quotas.delete(quotaId);
    }
  }
}

/**
 * The counts of one restriction over the kept span, oldest first and ending with the bucket of `now`,
 * added up over the histories of several processes.
 */
export function rejectionSeries(
  histories: ReadonlyArray<readonly RestrictionRejections[]>,
  index: number,
  now: number,
): number[] {
  const newest = Math.floor(now / bucketMs);
  const counts = new Array<number>(rejectionBucketsKept).fill(0);
  for (const history of histories) {
    for (const [bucket, count] of history.find((entry) => entry.index === index)?.buckets ?? []) {
      const position = bucket - newest + rejectionBucketsKept - 1;
      if (position >= 0 && position < rejectionBucketsKept) counts[position]! += count;
    }
  }
  return counts;
}
