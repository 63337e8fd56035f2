import { describe, expect, it } from 'vitest';
import { RejectionHistory, rejectionSeries } from '../../src/observe/rejection-history.js';

/** The console's sparklines: rejections per restriction in ten-second buckets over five minutes. */
const start = 1_800_000_000_000; // a bucket boundary

describe('rejection history', () => {
  it('counts rejections per restriction in ten-second buckets, oldest first, ending now', () => {
    const clock = { now: start };
    const history = new RejectionHistory(() => clock.now);
    history.record('q', 0);
    history.record('q', 0);
    history.record('q', 1);
    history.record('other', 0);
    clock.now += 25_000;
    history.record('q', 0);
    const series = rejectionSeries([history.ofQuota('q')], 0, clock.now);
    expect(series).toHaveLength(30);
    expect(series.slice(-3)).toEqual([2, 0, 1]);
    expect(series.slice(0, -3).every((count) => count === 0)).toBe(true);
    expect(rejectionSeries([history.ofQuota('q')], 1, clock.now).slice(-3)).toEqual([1, 0, 0]);
    expect(rejectionSeries([history.ofQuota('q')], 2, clock.now).every((count) => count === 0)).toBe(true);
  });

  it('forgets what is older than five minutes, and keeps at most that span per restriction', () => {
    const clock = { now: start };
    const history = new RejectionHistory(() => clock.now);
    history.record('q', 0);
    clock.now += 290_000;
    expect(rejectionSeries([history.ofQuota('q')], 0, clock.now)[0]).toBe(1);
    clock.now += 10_000;
    expect(rejectionSeries([history.ofQuota('q')], 0, clock.now).every((count) => count === 0)).toBe(true);
    expect(history.ofQuota('q')).toEqual([]);
    // A rejection every 10 s for an hour: the line never holds more than 30 buckets.
    for (let i = 0; i < 360; i += 1) {
      clock.now += 10_000;
      history.record('q', 0);
    }
    expect(history.ofQuota('q')[0]!.buckets).toHaveLength(30);
  });

  it('adds up the histories of several processes bucket by bucket', () => {
    const clock = { now: start };
    const a = new RejectionHistory(() => clock.now);
    const b = new RejectionHistory(() => clock.now);
    a.record('q', 0);
    b.record('q', 0);
    b.record('q', 0);
    clock.now += 10_000;
    a.record('q', 0);
    expect(rejectionSeries([a.ofQuota('q'), b.ofQuota('q')], 0, clock.now).slice(-2)).toEqual([3, 1]);
  });

  it('hands over each rejection once (takeUnsent), and again only what did not arrive (giveBack)', () => {
    const clock = { now: start };
    const history = new RejectionHistory(() => clock.now);
    history.record('q', 0);
    history.record('q', 0);
    history.record('q', 1);
    const first = history.takeUnsent();
    expect(first).toEqual([
      { quotaId: 'q', index: 0, buckets: [[start / 10_000, 2]] },
      { quotaId: 'q', index: 1, buckets: [[start / 10_000, 1]] },
    ]);
    expect(history.takeUnsent()).toEqual([]);
    history.record('q', 0);
    clock.now += 10_000;
    history.record('q', 0);
    const second = history.takeUnsent();
    expect(second).toEqual([
      {
        quotaId: 'q',
        index: 0,
        buckets: [
          [start / 10_000, 1],
          [start / 10_000 + 1, 1],
        ],
      },
    ]);
    // The hand-over failed: the same counts come again, added to by what came since.
    history.giveBack(second);
    history.record('q', 0);
    expect(history.takeUnsent()).toEqual([
      {
        quotaId: 'q',
        index: 0,
        buckets: [
          [start / 10_000, 1],
          [start / 10_000 + 1, 2],
        ],
      },
    ]);
    // The history itself was never touched: 3 + 2 rejections of restriction 0.
    expect(rejectionSeries([history.ofQuota('q')], 0, clock.now).slice(-2)).toEqual([3, 2]);
  });
});
