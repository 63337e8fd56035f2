import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ReloadLoop } from '../../src/quota/reload-loop.js';
import { FakeTimers } from '../helpers/fake-timers.js';

/** A loop over a task that fails on the calls `fails` picks; it records what the loop reports. */
function loopFailing(fails: (call: number) => boolean) {
  const timers = new FakeTimers();
  const reported = { failures: [] as number[], recoveries: [] as number[] };
  let calls = 0;
  const loop = new ReloadLoop(
    async () => {
      calls += 1;
      if (fails(calls)) throw new Error(`Stream isn't writeable (${calls})`);
    },
    {
      timers,
      onFailure: (_error, count) => reported.failures.push(count),
      onRecovery: (count) => reported.recoveries.push(count),
    },
  );
  return { loop, timers, reported, calls: () => calls };
}

describe('ReloadLoop', () => {
  it('retries a failed reload after 100 ms, doubling up to 2 s, until one succeeds', async () => {
    const { loop, timers, reported, calls } = loopFailing((call) => call <= 7);
    await expect(loop.run()).rejects.toThrow("Stream isn't writeable (1)");
    expect(timers.waiting()).toEqual([100]);
    timers.advance(99);
    await turn();
    expect(calls()).toBe(1);
    timers.advance(1);
    await turn();
    expect(calls()).toBe(2);
    for (const delay of [200, 400, 800, 1600, 2000, 2000]) {
      expect(timers.waiting()).toEqual([delay]);
      timers.advance(delay);
      await turn();
    }
    expect(calls()).toBe(8);
    expect(timers.delays).toEqual([100, 200, 400, 800, 1600, 2000, 2000]);
    expect(timers.waiting()).toEqual([]);
    expect(reported).toEqual({ failures: [1, 2, 3, 4, 5, 6, 7], recoveries: [7] });
  });

  it('waits 100 ms again after a failure that follows a success', async () => {
    const { loop, timers } = loopFailing((call) => call !== 3);
    await expect(loop.run()).rejects.toThrow();
    timers.advance(100);
    await turn();
    expect(timers.waiting()).toEqual([200]);
    timers.advance(200);
    await turn();
    expect(timers.waiting()).toEqual([]);
    await expect(loop.run()).rejects.toThrow("Stream isn't writeable (4)");
    expect(timers.waiting()).toEqual([100]);
  });

  it('stops retrying once closed', async () => {
    const { loop, timers, calls } = loopFailing(() => true);
    await expect(loop.run()).rejects.toThrow();
    await loop.close();
    expect(timers.waiting()).toEqual([]);
    timers.advance(60_000);
    loop.request();
    await turn();
    expect(calls()).toBe(1);
  });

  it('runs at once when asked during the backoff, and drops the wait', async () => {
    const { loop, timers, reported, calls } = loopFailing((call) => call === 1);
    await expect(loop.run()).rejects.toThrow();
    expect(timers.waiting()).toEqual([100]);
    await loop.run();
    expect(calls()).toBe(2);
    expect(timers.waiting()).toEqual([]);
    expect(reported.recoveries).toEqual([1]);
  });

  it('folds the requests made while a reload runs into one more reload', async () => {
    let release: () => void = () => undefined;
    let calls = 0;
    const loop = new ReloadLoop(
      async () => {
        calls += 1;
        if (calls === 1) await new Promise<void>((resolve) => (release = resolve));
      },
      { timers: new FakeTimers(), onFailure: () => undefined, onRecovery: () => undefined },
    );
    const first = loop.run();
    await turn();
    const later = [loop.run(), loop.run(), loop.run()];
    loop.request();
    release();
    await Promise.all([first, ...later]);
    expect(calls).toBe(2);
  });
});
