import { describe, expect, it } from 'vitest';
import type { CounterSpec, CounterState, Decision } from '../../src/limiter/counter-store.js';
import type { Limiter, LimiterVerdict } from '../../src/limiter/limiter.js';
import { settle, type FakeClock } from '../helpers/fake-clock.js';
import { limiterOverFakeStore as setUp, type FakeSharedStore } from '../helpers/fake-shared-store.js';

/**
 * The limiter's switch → fallback → recovery state machine, on a fake clock, against a shared store
 * whose answers the test gives (and withholds) by hand. The hysteresis itself: outage-hysteresis.test.ts.
 */
const spec = (limit = 60): CounterSpec => ({ key: 'k', limit, windowMs: 60_000, cost: 1, need: 1 });
const allowed: Decision = { allowed: true, retryAfterMs: 0, states: [{ used: 1, resetMs: 60_000 }] };

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

/**
 * Fails the store's last pending call, then lets the PINGs of the probe fail until the outage is
 * confirmed (three failures over a second): from then on the policy decides every request.
 */
async function confirmOutage(clock: FakeClock, shared: FakeSharedStore, setPing: (answer: false) => void) {
  setPing(false);
  shared.asked.at(-1)!.fail(new Error('Connection is closed.'));
  await settle();
  await clock.advance(1_000);
  expect(shared.suspended).toBe(true);
}

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

  it('hands a late decision to the policy only once a PING goes unanswered, and switches once the outage is confirmed', async () => {
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
    // One unanswered PING is one failure: the store still decides the next request.
    expect(shared.suspended).toBe(false);
    expect(switches(lines)).toBe(0);
    void limiter.consume([spec()]);
    expect(shared.asked).toHaveLength(3);
    // The probe's PINGs go unanswered every 450 ms: the fourth failure, 1.35 s after the first, is over a
    // second after it, and confirms the outage.
    await clock.advance(1_349);
    expect(shared.suspended).toBe(false);
    await clock.advance(1);
    expect(shared.suspended).toBe(true);
    expect(switches(lines)).toBe(1);
    // Now decided at once, without asking the store.
    expect(limiter.consume([spec()])).toBe('unavailable');
    expect(shared.asked).toHaveLength(3);
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

  it('counts every slot this gateway holds against its share once the store is away, and tells the store of those it takes alone', async () => {
    const { clock, shared, limiter, setPing } = setUp('local', { live: 2 });
    const slot: CounterSpec = { key: 'in-flight', limit: 6, windowMs: 0, cost: 1, need: 1 };
    const first = await decide(limiter, [slot]);
    shared.asked[0]!.answer({ ...allowed, slotsFreedBy: shared });
    await settle();
    const second = await decide(limiter, [slot]);
    await confirmOutage(clock, shared, setPing);
    // A share of 3: the slot Redis gave, the one decided alone when its call failed, and one more.
    expect(second.verdict()).toMatchObject({ allowed: true });
    const third = limiter.consume([slot]) as Decision;
    expect(third).toMatchObject({ allowed: true });
    expect(limiter.consume([slot])).toMatchObject({ allowed: false });
    expect(shared.held).toEqual(['in-flight', 'in-flight']);
    // A slot frees in both stores, wherever it was taken.
    (first.verdict() as Decision).slotsFreedBy!.release(['in-flight']);
    third.slotsFreedBy!.release(['in-flight']);
    expect(shared.released).toEqual(['in-flight', 'in-flight']);
    expect(limiter.consume([slot])).toMatchObject({ allowed: true });
    expect(limiter.consume([slot])).toMatchObject({ allowed: true });
    expect(limiter.consume([slot])).toMatchObject({ allowed: false });
  });

  it('admits under allow a request whose call failed, and every request once the outage is confirmed', async () => {
    const { clock, shared, limiter, setPing } = setUp('allow');
    const pending = await decide(limiter, [spec(1)]);
    await confirmOutage(clock, shared, setPing);
    expect(pending.verdict()).toMatchObject({ allowed: true });
    for (let i = 0; i < 5; i += 1) expect(limiter.consume([spec(1)])).toMatchObject({ allowed: true });
  });

  it("enforces this gateway's share under local, seeded with its share of what the fleet had counted", async () => {
    // A fleet of 3 at a limit of 60: a share of 20. The fleet had counted 30: this gateway's part is 10.
    const { clock, shared, limiter, setPing } = setUp('local', { live: 3 });
    shared.known = [{ key: 'k', used: 30, limit: 60, windowMs: 60_000, at: clock.now() }];
    const pending = await decide(limiter, [spec()]);
    await confirmOutage(clock, shared, setPing);
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
      const { clock, shared, limiter, setPing } = setUp('local', { live: 3, rank });
      const pending = await decide(limiter, [spec(10)]);
      await confirmOutage(clock, shared, setPing);
      let admitted = (pending.verdict() as Decision).allowed ? 1 : 0;
      for (let i = 0; i < 20; i += 1) if ((limiter.consume([spec(10)]) as Decision).allowed) admitted += 1;
      return admitted;
    };
    expect([await admittedBy(0), await admittedBy(1), await admittedBy(2)]).toEqual([4, 3, 3]);
  });

  it('probes while the store is away, and once it has answered for a second hands back what was admitted alone before deciding with it again', async () => {
    const { clock, shared, limiter, setPing, lines } = setUp('local');
    const pending = await decide(limiter, [spec()]);
    await confirmOutage(clock, shared, setPing);
    for (let i = 0; i < 3; i += 1) limiter.consume([spec()]);
    await limiter.add([{ key: 'k', windowMs: 60_000, amount: 700 }]);
    expect(pending.verdict()).toMatchObject({ allowed: true });
    await clock.advance(1_000);
    expect(shared.asked).toHaveLength(1);
    setPing(true);
    // The probe of 250 ms from now is answered; three more answers, 750 ms of them, are not enough.
    await clock.advance(1_000);
    expect(shared.suspended).toBe(true);
    expect(limiter.consume([{ ...spec(), key: 'other' }])).toMatchObject({ allowed: true });
    await clock.advance(250);
    expect(shared.suspended).toBe(false);
    expect(shared.handedBack).toEqual([
      [
        { key: 'k', windowMs: 60_000, amount: 4 + 700 },
        { key: 'other', windowMs: 60_000, amount: 1 },
      ],
    ]);
    const back = await decide(limiter, [spec()]);
    expect(shared.asked).toHaveLength(2);
    shared.asked[1]!.answer(allowed);
    await settle();
    expect(back.verdict()).toBe(allowed);
    expect(
      lines.filter((line) => String(line.msg).startsWith('shared counter store answers again')),
    ).toHaveLength(1);
  });

  it('stays with the policy while the units admitted alone cannot be handed back, and hands each unit once', async () => {
    const { clock, shared, limiter, setPing } = setUp('local');
    const pending = await decide(limiter, [spec()]);
    await confirmOutage(clock, shared, setPing);
    expect(pending.verdict()).toMatchObject({ allowed: true });
    setPing(true);
    shared.failAdds = true;
    await clock.advance(1_250);
    expect(shared.handedBack).toEqual([[{ key: 'k', windowMs: 60_000, amount: 1 }]]);
    expect(shared.suspended).toBe(true);
    expect(limiter.consume([spec()])).toMatchObject({ allowed: true });
    shared.failAdds = false;
    await clock.advance(1_250);
    // The store kept what it was handed the first time: only the unit admitted since goes again.
    expect(shared.handedBack.at(-1)).toEqual([{ key: 'k', windowMs: 60_000, amount: 1 }]);
    expect(shared.suspended).toBe(false);
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

  it('gives a read up once a PING goes unanswered, and counts it as a failure of the store', async () => {
    const { clock, limiter, lines, setPing } = setUp('deny');
    setPing('never');
    let failure: unknown = null;
    void limiter.peek([{ key: 'k', windowMs: 60_000 }]).catch((error: unknown) => (failure = error));
    await clock.advance(249);
    expect(failure).toBeNull();
    await clock.advance(1);
    expect(String(failure)).toContain("the shared counter store is unreachable and store.onError is 'deny'");
    expect(switches(lines)).toBe(0);
    await clock.advance(1_350);
    expect(switches(lines)).toBe(1);
    expect(limiter.consume([spec()])).toBe('unavailable');
  });

  it.each(['deny', 'allow'] as const)(
    'has no counters to read under %s while the store is away: the read fails instead of answering zeros',
    async (onError) => {
      const { clock, shared, limiter, setPing } = setUp(onError);
      const pending = await decide(limiter, [spec()]);
      await confirmOutage(clock, shared, setPing);
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
    expect(switches(lines)).toBe(0);
  });

  it("reads this gateway's own counters under local while the store is away, as its decisions do", async () => {
    const { shared, limiter, clock, setPing } = setUp('local');
    shared.known = [{ key: 'k', used: 30, limit: 60, windowMs: 60_000, at: clock.now() }];
    const pending = await decide(limiter, [spec()]);
    await confirmOutage(clock, shared, setPing);
    expect(pending.verdict()).toMatchObject({ allowed: true });
    const [state] = await limiter.peek([{ key: 'k', windowMs: 60_000 }]);
    expect(state!.used).toBe(31);
    expect(shared.peeked).toHaveLength(0);
  });
});
