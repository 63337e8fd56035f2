import { describe, expect, it } from 'vitest';
import type {
  CounterAddition,
  CounterSpec,
  CounterState,
  CounterUsage,
  Decision,
} from '../../src/limiter/counter-store.js';
import {
  Limiter,
  type LimiterVerdict,
  type OnError,
  type SharedCounters,
} from '../../src/limiter/limiter.js';
import { MemoryCounterStore } from '../../src/limiter/memory-counter-store.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { capturingLogger } from '../helpers/log-capture.js';

/**
 * The limiter's switch → fallback → recovery state machine, on a fake clock, against a shared store
 * whose answers the test gives (and withholds) by hand.
 */
class FakeSharedStore implements SharedCounters {
  readonly asked: Array<{
    specs: readonly CounterSpec[];
    answer: (decision: Decision) => void;
    fail: (error: Error) => void;
  }> = [];
  readonly added: CounterAddition[][] = [];
  failAdds = false;
  suspended = false;
  known: Array<{ key: string; used: number; limit: number; windowMs: number; at: number }> = [];

  consume(specs: readonly CounterSpec[]): Promise<Decision> {
    return new Promise((answer, fail) => this.asked.push({ specs, answer, fail }));
  }

  async add(additions: readonly CounterAddition[]): Promise<void> {
    if (this.failAdds) throw new Error('connection closed');
    this.added.push([...additions]);
  }

  async usage(): Promise<CounterUsage[]> {
    return [];
  }

  /** Reads the test answers (or fails) by hand; none is answered by itself. */
  readonly peeked: Array<{ answer: (states: CounterState[]) => void; fail: (error: Error) => void }> = [];

  peek(): Promise<CounterState[]> {
    return new Promise((answer, fail) => this.peeked.push({ answer, fail }));
  }

  async close(): Promise<void> {}

  suspend(): void {
    this.suspended = true;
  }

  resume(): void {
    this.suspended = false;
  }

  lastKnown() {
    return this.known;
  }
}

const spec = (limit = 60): CounterSpec => ({ key: 'k', limit, windowMs: 60_000, cost: 1, need: 1 });
const allowed: Decision = { allowed: true, retryAfterMs: 0, states: [{ used: 1, resetMs: 60_000 }] };

function setUp(onError: OnError, options: { live?: number; rank?: number } = {}) {
  const clock = new FakeClock();
  const shared = new FakeSharedStore();
  const local = new MemoryCounterStore({ now: clock.now });
  let pingAnswers: boolean | 'never' = true;
  const pings: Array<(answer: boolean) => void> = [];
  const { lines, logger } = capturingLogger();
  const live = options.live ?? 1;
  const limiter = new Limiter({
    shared,
    local,
    onError,
    timeoutMs: 50,
    probeEveryMs: 250,
    clock,
    probe: () =>
      pingAnswers === 'never' ? new Promise((resolve) => pings.push(resolve)) : Promise.resolve(pingAnswers),
    // limit ÷ live, the remainder to the first ranks, as the heartbeat does.
    shareOf: (limit) => Math.floor(limit / live) + ((options.rank ?? 0) < limit % live ? 1 : 0),
    logger,
    metrics: createMetrics(),
  });
  return {
    clock,
    shared,
    local,
    limiter,
    lines,
    setPing: (answer: boolean | 'never') => (pingAnswers = answer),
  };
}

/** Starts a decision and lets it reach its first wait. */
async function decide(
  limiter: Limiter,
  specs: CounterSpec[],
): Promise<{ verdict: () => LimiterVerdict | undefined }> {
  let verdict: LimiterVerdict | undefined;
  void Promise.resolve(limiter.consume(specs)).then((settled) => (verdict = settled));
  await settle();
  return { verdict: () => verdict };
}

const switches = (lines: Array<Record<string, unknown>>) =>
  lines.filter((line) => String(line.msg).startsWith('shared counter store unreachable')).length;

describe('Limiter', () => {
  it('waits past the deadline for a slow store that still answers PING, and uses its decision', async () => {
    const { clock, shared, limiter, lines } = setUp('local');
    const pending = await decide(limiter, [spec()]);
    await clock.advance(500);
    expect(pending.verdict()).toBeUndefined();
    shared.asked[0]!.answer(allowed);
    await settle();
    expect(pending.verdict()).toBe(allowed);
    expect(switches(lines)).toBe(0);
    expect(
      lines.some((line) =>
        String(line.msg).startsWith('a call to the shared counter store missed its deadline'),
      ),
    ).toBe(true);
  });

  it('hands a late decision to the policy only once a PING confirms the outage, and logs the switch once', async () => {
    const { clock, shared, limiter, lines, setPing } = setUp('deny');
    setPing('never');
    const first = await decide(limiter, [spec()]);
    const second = await decide(limiter, [spec()]);
    await clock.advance(50);
    expect(first.verdict()).toBeUndefined();
    // The PING, sent at the deadline, gets four times the deadline, at least 200 ms.
    await clock.advance(199);
    expect(first.verdict()).toBeUndefined();
    await clock.advance(1);
    expect(first.verdict()).toBe('unavailable');
    expect(second.verdict()).toBe('unavailable');
    expect(shared.suspended).toBe(true);
    expect(switches(lines)).toBe(1);
    // Now decided at once, without asking the store.
    expect(limiter.consume([spec()])).toBe('unavailable');
    expect(shared.asked).toHaveLength(2);
  });

  it('frees at once the concurrency slots of a decision that came after it was given up for the policy', async () => {
    const { clock, shared, limiter, setPing } = setUp('local');
    setPing('never');
    const slot: CounterSpec = { key: 'in-flight', limit: 5, windowMs: 0, cost: 1, need: 1 };
    const pending = await decide(limiter, [spec(), slot]);
    await clock.advance(250);
    expect(pending.verdict()).toMatchObject({ allowed: true });
    const freed: string[][] = [];
    shared.asked[0]!.answer({ ...allowed, slotsFreedBy: { release: (keys) => freed.push([...keys]) } });
    await settle();
    expect(freed).toEqual([['in-flight']]);
  });

  it('switches at once when a call fails, and admits everything under allow', async () => {
    const { shared, limiter } = setUp('allow');
    const pending = await decide(limiter, [spec(1)]);
    shared.asked[0]!.fail(new Error('Connection is closed.'));
    await settle();
    expect(pending.verdict()).toMatchObject({ allowed: true });
    for (let i = 0; i < 5; i += 1) expect(limiter.consume([spec(1)])).toMatchObject({ allowed: true });
  });

  it("enforces this gateway's share under local, seeded with its share of what the fleet had counted", async () => {
    // A fleet of 3 at a limit of 60: a share of 20. The fleet had counted 30: this gateway's part is 10.
    const { clock, shared, limiter } = setUp('local', { live: 3 });
    shared.known = [{ key: 'k', used: 30, limit: 60, windowMs: 60_000, at: clock.now() }];
    const pending = await decide(limiter, [spec()]);
    shared.asked[0]!.fail(new Error('Connection is closed.'));
    await settle();
    expect(pending.verdict()).toMatchObject({ allowed: true });
    let admitted = 1;
    for (let i = 0; i < 50; i += 1) if ((limiter.consume([spec()]) as Decision).allowed) admitted += 1;
    expect(admitted).toBe(10);
  });

  it('lets the seeds leave the window when the units they stand for do: none from a total a window old', async () => {
    const { clock, shared, limiter, setPing } = setUp('local');
    setPing(false);
    const seenAt = clock.now();
    shared.known = [
      { key: 'k', used: 60, limit: 60, windowMs: 60_000, at: seenAt },
      { key: 'old', used: 60, limit: 60, windowMs: 60_000, at: seenAt - 61_000 },
    ];
    await clock.advance(30_000);
    const pending = await decide(limiter, [spec(), { ...spec(), key: 'old' }]);
    shared.asked[0]!.fail(new Error('Connection is closed.'));
    await settle();
    // Refused for what is left of the window that counted them (and a sub-bucket), not a whole one.
    expect(pending.verdict()).toMatchObject({ allowed: false, retryAfterMs: 30_600 });
    await clock.advance(30_600);
    expect(limiter.consume([spec(), { ...spec(), key: 'old' }])).toMatchObject({ allowed: true });
  });

  it('gives the remainder of a share to the first ranks, so the shares add up to the limit', async () => {
    const admittedBy = async (rank: number) => {
      const { shared, limiter } = setUp('local', { live: 3, rank });
      const pending = await decide(limiter, [spec(10)]);
      shared.asked[0]!.fail(new Error('down'));
      await settle();
      let admitted = (pending.verdict() as Decision).allowed ? 1 : 0;
      for (let i = 0; i < 20; i += 1) if ((limiter.consume([spec(10)]) as Decision).allowed) admitted += 1;
      return admitted;
    };
    expect([await admittedBy(0), await admittedBy(1), await admittedBy(2)]).toEqual([4, 3, 3]);
  });

  it('probes while the store is away, and when it answers adds what was admitted alone before deciding with it again', async () => {
    const { clock, shared, limiter, setPing, lines } = setUp('local');
    const pending = await decide(limiter, [spec()]);
    shared.asked[0]!.fail(new Error('down'));
    await settle();
    for (let i = 0; i < 3; i += 1) limiter.consume([spec()]);
    await limiter.add([{ key: 'k', windowMs: 60_000, amount: 700 }]);
    expect(pending.verdict()).toMatchObject({ allowed: true });
    setPing(false);
    await clock.advance(1_000);
    expect(shared.asked).toHaveLength(1);
    setPing(true);
    await clock.advance(250);
    expect(shared.suspended).toBe(false);
    expect(shared.added).toEqual([[{ key: 'k', windowMs: 60_000, amount: 4 + 700 }]]);
    const back = await decide(limiter, [spec()]);
    expect(shared.asked).toHaveLength(2);
    shared.asked[1]!.answer(allowed);
    await settle();
    expect(back.verdict()).toBe(allowed);
    expect(
      lines.filter((line) => String(line.msg).startsWith('shared counter store answers again')),
    ).toHaveLength(1);
  });

  it('stays with the policy while the units admitted alone cannot be added, and keeps them', async () => {
    const { clock, shared, limiter } = setUp('local');
    const pending = await decide(limiter, [spec()]);
    shared.asked[0]!.fail(new Error('down'));
    await settle();
    expect(pending.verdict()).toMatchObject({ allowed: true });
    shared.failAdds = true;
    await clock.advance(250);
    expect(shared.suspended).toBe(true);
    expect(limiter.consume([spec()])).toMatchObject({ allowed: true });
    shared.failAdds = false;
    await clock.advance(250);
    expect(shared.added).toEqual([[{ key: 'k', windowMs: 60_000, amount: 2 }]]);
  });

  it('waits past the deadline for a read of a slow store that still answers PING, as for a decision', async () => {
    const { clock, shared, limiter, lines } = setUp('deny');
    let read: CounterState[] | null = null;
    void limiter.peek([{ key: 'k', windowMs: 60_000 }]).then((states) => (read = states));
    await clock.advance(500);
    expect(read).toBeNull();
    shared.peeked[0]!.answer([{ used: 7, resetMs: 1_000 }]);
    await settle();
    expect(read).toEqual([{ used: 7, resetMs: 1_000 }]);
    expect(switches(lines)).toBe(0);
  });

  it('gives a read up once a PING confirms the outage, and hands the decisions to the policy', async () => {
    const { clock, limiter, lines, setPing } = setUp('deny');
    setPing('never');
    let failure: unknown = null;
    void limiter.peek([{ key: 'k', windowMs: 60_000 }]).catch((error: unknown) => (failure = error));
    await clock.advance(249);
    expect(failure).toBeNull();
    await clock.advance(1);
    expect(String(failure)).toContain("the shared counter store is unreachable and store.onError is 'deny'");
    expect(switches(lines)).toBe(1);
    expect(limiter.consume([spec()])).toBe('unavailable');
  });

  it.each(['deny', 'allow'] as const)(
    'has no counters to read under %s while the store is away: the read fails instead of answering zeros',
    async (onError) => {
      const { shared, limiter } = setUp(onError);
      const pending = await decide(limiter, [spec()]);
      shared.asked[0]!.fail(new Error('Connection is closed.'));
      await settle();
      expect(pending.verdict()).toBeDefined();
      await expect(limiter.peek([{ key: 'k', windowMs: 60_000 }])).rejects.toThrow(
        `the shared counter store is unreachable and store.onError is '${onError}'`,
      );
      expect(shared.peeked).toHaveLength(0);
    },
  );

  it("reads this gateway's own counters under local once a read fails, as its decisions would", async () => {
    const { shared, limiter, lines, clock } = setUp('local');
    shared.known = [{ key: 'k', used: 30, limit: 60, windowMs: 60_000, at: clock.now() }];
    const read = limiter.peek([{ key: 'k', windowMs: 60_000 }]);
    await settle();
    shared.peeked[0]!.fail(new Error('Connection is closed.'));
    expect(await read).toEqual([{ used: 30, resetMs: expect.any(Number) }]);
    expect(switches(lines)).toBe(1);
  });

  it("reads this gateway's own counters under local while the store is away, as its decisions do", async () => {
    const { shared, limiter, clock } = setUp('local');
    shared.known = [{ key: 'k', used: 30, limit: 60, windowMs: 60_000, at: clock.now() }];
    const pending = await decide(limiter, [spec()]);
    shared.asked[0]!.fail(new Error('Connection is closed.'));
    await settle();
    expect(pending.verdict()).toMatchObject({ allowed: true });
    const [state] = await limiter.peek([{ key: 'k', windowMs: 60_000 }]);
    expect(state!.used).toBe(31);
    expect(shared.peeked).toHaveLength(0);
  });
});
