import { describe, expect, it } from 'vitest';
import type { ApiConfig } from '../../src/config/schema.js';
import { OutlierDetection, isTargetFailure } from '../../src/upstream/outlier-detection.js';
import { InvalidUpstreamResponse } from '../../src/upstream/outcomes.js';
import { TargetPool, type PoolTarget } from '../../src/upstream/target-pool.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { capturingLogger } from '../helpers/log-capture.js';

const rule = { consecutiveFailures: 3, ejectTime: 30_000 };

/** A pool of API `pets` with targets named by `names` (their origins), under `rule`, and its detection. */
function poolOf(names: string[]) {
  const timers = new FakeTimers();
  const { lines, logger } = capturingLogger();
  const detection = new OutlierDetection(timers, logger);
  const targets: Array<PoolTarget<string>> = names.map((name) => ({
    origin: name,
    name,
    weight: 1,
    health: { healthy: true, failures: 0, successes: 0 },
    standing: detection.standingOf('pets', name),
    score: 0,
    counts: { requests: 0, failures: 0, retries: 0 },
  }));
  const pool = new TargetPool(targets, 'round-robin', () => 0, 0, rule);
  const fail = (target: PoolTarget<string>, times = 1) => {
    for (let i = 0; i < times; i += 1) detection.failed('pets', pool, target);
  };
  return { timers, lines, detection, targets, pool, fail };
}

const picks = (pool: TargetPool<string>, count: number) =>
  Array.from({ length: count }, () => pool.pick().name).join(' ');

describe('passive outlier detection', () => {
  it('ejects a target after consecutiveFailures in a row, for ejectTime, then takes it back', () => {
    const { timers, lines, targets, pool, fail } = poolOf(['a', 'b', 'c']);
    fail(targets[0]!, 2);
    expect(picks(pool, 3)).toBe('a b c');
    fail(targets[0]!);
    expect(targets[0]!.standing.ejected).toBe(true);
    expect(picks(pool, 4)).toBe('b c b c');
    expect(lines.at(-1)).toMatchObject({
      msg: 'upstream target ejected: its exchanges failed in a row',
      api: 'pets',
      target: 'a',
      failures: 3,
    });
    timers.advance(rule.ejectTime - 1);
    expect(picks(pool, 2)).toBe('b c');
    timers.advance(1);
    expect(targets[0]!.standing).toMatchObject({ ejected: false, failures: 0 });
    expect(picks(pool, 3)).toContain('a');
    expect(lines.at(-1)).toMatchObject({ msg: 'upstream target back: its ejection ended', target: 'a' });
  });

  it('starts the count again after a success', () => {
    const { detection, targets, fail } = poolOf(['a', 'b']);
    fail(targets[0]!, 2);
    detection.succeeded(targets[0]!);
    fail(targets[0]!, 2);
    expect(targets[0]!.standing).toMatchObject({ ejected: false, failures: 2 });
    fail(targets[0]!);
    expect(targets[0]!.standing.ejected).toBe(true);
  });

  it('never ejects more than half of the targets at once', () => {
    const { targets, pool, fail } = poolOf(['a', 'b', 'c', 'd', 'e']);
    for (const target of targets) fail(target, rule.consecutiveFailures);
    expect(targets.map(({ standing }) => standing.ejected)).toEqual([true, true, false, false, false]);
    expect(picks(pool, 3)).toBe('c d e');
    const alone = poolOf(['only']);
    alone.fail(alone.targets[0]!, 10);
    expect(alone.targets[0]!.standing.ejected).toBe(false);
  });

  it('sends to every target when each is out, by health or ejection', () => {
    const { targets, pool, fail } = poolOf(['a', 'b']);
    targets[1]!.health.healthy = false;
    fail(targets[0]!, rule.consecutiveFailures);
    expect(targets[0]!.standing.ejected).toBe(true);
    expect(picks(pool, 4)).toBe('a b a b');
  });

  it('keeps the standing of a target a reload keeps, and ends the ejection of one it drops', () => {
    const { timers, detection, targets, fail } = poolOf(['http://a:1', 'http://b:1']);
    fail(targets[0]!, rule.consecutiveFailures);
    fail(targets[1]!);
    const api = (origins: string[]) =>
      ({ id: 'pets', upstream: { targets: origins } }) as unknown as ApiConfig;
    detection.watch([api(['http://b:1/v2'])]);
    expect(detection.standingOf('pets', 'http://b:1')).toBe(targets[1]!.standing);
    expect(detection.standingOf('pets', 'http://a:1')).not.toBe(targets[0]!.standing);
    expect(timers.waiting()).toEqual([]);
  });

  it("counts the target's failures, not the gateway's own", () => {
    const coded = (code: string) => Object.assign(new Error(code), { code });
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'UND_ERR_HEADERS_TIMEOUT'])
      expect(isTargetFailure(coded(code))).toBe(true);
    expect(isTargetFailure(new InvalidUpstreamResponse('status 42'))).toBe(true);
    expect(isTargetFailure(new Error('the request body passed its byte restriction'))).toBe(false);
    expect(isTargetFailure(coded('GRPC_DEADLINE_EXCEEDED'))).toBe(false);
  });
});
