import { describe, expect, it } from 'vitest';
import type { TargetHealth } from '../../src/upstream/health-checks.js';
import { TargetPool, type PoolTarget } from '../../src/upstream/target-pool.js';

/** A target named `name` of `weight`; its origin stands for itself (the pool only hands it back). */
function targetOf(name: string, weight: number, health: Partial<TargetHealth> = {}): PoolTarget<string> {
  return {
    origin: name,
    name,
    weight,
    health: { healthy: true, failures: 0, successes: 0, ...health },
    standing: { failures: 0, ejected: false, ejection: null, ejections: 0 },
    score: 0,
    counts: { requests: 0, failures: 0, retries: 0 },
  };
}

const picks = (pool: TargetPool<string>, count: number) =>
  Array.from({ length: count }, () => pool.pick().name).join(' ');

describe('the balancing of a pool', () => {
  it('interleaves the targets by weight under round-robin (3:1 is a a b a, not a a a b)', () => {
    const pool = new TargetPool([targetOf('a', 3), targetOf('b', 1)], 'round-robin', () => 0, 0);
    expect(picks(pool, 8)).toBe('a a b a a a b a');
  });

  it('passes over a target that is out, and takes them all when every one is out', () => {
    const out = targetOf('b', 1, { healthy: false });
    const pool = new TargetPool([targetOf('a', 1), out, targetOf('c', 1)], 'round-robin', () => 0, 0);
    expect(picks(pool, 4)).toBe('a c a c');
    const allOut = new TargetPool(
      [targetOf('a', 1, { healthy: false }), targetOf('b', 1, { healthy: false })],
      'round-robin',
      () => 0,
      0,
    );
    expect(picks(allOut, 4)).toBe('a b a b');
  });

  it('picks the fewest in flight for the weight under least-requests, by weight among equals', () => {
    const inFlight = new Map<string, number>([
      ['a', 0],
      ['b', 0],
    ]);
    const pool = new TargetPool(
      [targetOf('a', 2), targetOf('b', 1)],
      'least-requests',
      (origin) => inFlight.get(origin)!,
      0,
    );
    expect(picks(pool, 6)).toBe('a b a a b a');
    inFlight.set('a', 3);
    inFlight.set('b', 1);
    // 3 / 2 against 1 / 1: b.
    expect(picks(pool, 2)).toBe('b b');
    inFlight.set('a', 1);
    expect(picks(pool, 2)).toBe('a a');
  });

  it('picks another target than those tried, healthy first, and none when every one was tried', () => {
    const [a, b, c] = [targetOf('a', 1), targetOf('b', 1, { healthy: false }), targetOf('c', 1)];
    const pool = new TargetPool([a, b, c], 'round-robin', () => 0, 2);
    expect(pool.pickOther([a])?.name).toBe('c');
    expect(pool.pickOther([a, c])?.name).toBe('b');
    expect(pool.pickOther([a, b, c])).toBeNull();
  });
});
