import { describe, expect, it } from 'vitest';
import type { CounterSpec, Decision } from '../../src/limiter/counter-store.js';
import type { LimiterVerdict } from '../../src/limiter/limiter.js';
import { OutageDetector, type StandingChange } from '../../src/limiter/outage-detector.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { limiterOverFakeStore } from '../helpers/fake-shared-store.js';

/**
 * The hysteresis between the shared store's failures and the counting mode (issue 42, point 15): under
 * CPU starvation a live Redis missed 3 command timeouts and 4 PINGs in 76 s, and each flipped the fleet
 * to `onError: local` and back. Now failures in a row over a span confirm an outage, and answers over a
 * span end it; on a fake clock.
 */
const spec: CounterSpec = { key: 'k', limit: 60, windowMs: 60_000, cost: 1, need: 1 };
const allowed: Decision = { allowed: true, retryAfterMs: 0, states: [{ used: 1, resetMs: 60_000 }] };

describe('OutageDetector', () => {
  const detector = () => {
    const clock = new FakeClock();
    return { clock, outage: new OutageDetector(clock.now) };
  };

  it('suspects the store after one failure, and an answer clears it: no outage', () => {
    const { outage } = detector();
    expect(outage.failed()).toBe('suspected');
    expect(outage.standing).toBe('suspected');
    expect(outage.answered()).toBe('cleared');
    expect(outage.standing).toBe('answering');
  });

  it('confirms an outage only with three failures in a row over at least a second', async () => {
    const { clock, outage } = detector();
    const changes: Array<StandingChange | null> = [outage.failed()];
    for (let i = 0; i < 5; i += 1) {
      await clock.advance(199);
      changes.push(outage.failed());
    }
    // Six failures in 995 ms: not yet; the next, a second after the first, confirms it.
    expect(changes).toEqual(['suspected', null, null, null, null, null]);
    await clock.advance(5);
    expect(outage.failed()).toBe('confirmed');
    expect(outage.standing).toBe('away');
  });

  it('does not confirm two failures a second apart', async () => {
    const { clock, outage } = detector();
    outage.failed();
    await clock.advance(1_000);
    expect(outage.failed()).toBeNull();
    expect(outage.standing).toBe('suspected');
  });

  it('starts the count again after an answer between failures', async () => {
    const { clock, outage } = detector();
    outage.failed();
    await clock.advance(600);
    outage.failed();
    outage.answered();
    await clock.advance(600);
    expect(outage.failed()).toBe('suspected');
    await clock.advance(600);
    expect(outage.failed()).toBeNull();
  });

  it('ends an outage only once the store has answered for a second, and a failure meanwhile starts the wait again', async () => {
    const { clock, outage } = detector();
    outage.failed();
    await clock.advance(500);
    outage.failed();
    await clock.advance(500);
    expect(outage.failed()).toBe('confirmed');
    expect(outage.answered()).toBeNull();
    expect(outage.standing).toBe('returning');
    await clock.advance(750);
    expect(outage.failed()).toBeNull();
    expect(outage.standing).toBe('away');
    expect(outage.answered()).toBeNull();
    await clock.advance(999);
    expect(outage.answered()).toBeNull();
    await clock.advance(1);
    expect(outage.answered()).toBe('over');
    // Over for the limiter once it has handed back what it counted alone.
    expect(outage.standing).toBe('returning');
    outage.decidesAgain();
    expect(outage.standing).toBe('answering');
  });
});

/** Starts a decision and lets it reach its first wait. */
function decide(consume: () => LimiterVerdict | Promise<LimiterVerdict>) {
  let verdict: LimiterVerdict | undefined;
  void Promise.resolve(consume()).then((settled) => (verdict = settled));
  return { verdict: () => verdict };
}

const shared = (text: string) => /^quotagate_store_shared (\d)$/m.exec(text)?.[1];
const switchesTo = (text: string, to: string) =>
  Number(new RegExp(`^quotagate_store_switches_total\\{to="${to}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);

describe('the limiter through late answers and an outage', () => {
  it('decides one request whose call timed out by the policy, and leaves the counting mode alone', async () => {
    const { clock, shared: store, limiter, metrics } = limiterOverFakeStore('deny');
    const late = decide(() => limiter.consume([spec]));
    await settle();
    store.asked[0]!.fail(new Error('Command timed out'));
    await settle();
    expect(late.verdict()).toBe('unavailable');
    // The next request is asked of the store, which answers; so does the probe's PING.
    const next = decide(() => limiter.consume([spec]));
    await settle();
    store.asked[1]!.answer(allowed);
    await clock.advance(250);
    expect(next.verdict()).toBe(allowed);
    const text = await metrics.registry.metrics();
    expect(shared(text)).toBe('1');
    expect(switchesTo(text, 'deny')).toBe(0);
    expect(store.suspended).toBe(false);
  });

  it('never switches for late answers spread over a minute, each followed by answers, as under CPU starvation', async () => {
    const { clock, shared: store, limiter, metrics, setPing } = limiterOverFakeStore('local');
    for (let i = 0; i < 7; i += 1) {
      setPing(i % 2 === 0 ? 'never' : false);
      const late = decide(() => limiter.consume([spec]));
      await settle();
      // A command timeout, or an unanswered PING.
      if (i % 2 === 0) await clock.advance(250);
      else store.asked.at(-1)!.fail(new Error('Command timed out'));
      await settle();
      expect(late.verdict()).toMatchObject({ allowed: true });
      setPing(true);
      await clock.advance(10_000);
    }
    const text = await metrics.registry.metrics();
    expect(shared(text)).toBe('1');
    expect(switchesTo(text, 'local')).toBe(0);
    // What the policy admitted is handed to the store each time it answers again.
    expect(store.added.flat()).toEqual(Array(7).fill({ key: 'k', windowMs: 60_000, amount: 1 }));
  });

  it('switches after failures in a row over a second, and back only after a second of answers', async () => {
    const { clock, shared: store, limiter, metrics, setPing } = limiterOverFakeStore('local');
    setPing(false);
    decide(() => limiter.consume([spec]));
    await settle();
    store.asked[0]!.fail(new Error('Connection is closed.'));
    // Probes every 250 ms, each a failure: the fourth, at 1 s, confirms the outage.
    await clock.advance(999);
    expect(switchesTo(await metrics.registry.metrics(), 'local')).toBe(0);
    await clock.advance(1);
    expect(switchesTo(await metrics.registry.metrics(), 'local')).toBe(1);
    expect(limiter.consume([spec])).toMatchObject({ allowed: true });

    setPing(true);
    // Answered at 250 ms, then a failure at 500 ms: the wait for a stable second starts again.
    await clock.advance(250);
    setPing(false);
    await clock.advance(250);
    setPing(true);
    await clock.advance(1_000);
    expect(shared(await metrics.registry.metrics())).toBe('0');
    await clock.advance(250);
    const text = await metrics.registry.metrics();
    expect(shared(text)).toBe('1');
    expect(switchesTo(text, 'shared')).toBe(1);
    expect(store.handedBack).toEqual([[{ key: 'k', windowMs: 60_000, amount: 2 }]]);
  });
});
