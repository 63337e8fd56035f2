import { describe, expect, it } from 'vitest';
import { RetryBudget } from '../../src/upstream/retry-budget.js';

/** Retries the budget gives at `now`, asked one by one until it refuses (at most `cap`). */
function withdrawAll(budget: RetryBudget, now: number, cap = 10_000): number {
  let given = 0;
  while (given < cap && budget.withdraw(now)) given += 1;
  return given;
}

describe('RetryBudget', () => {
  it('gives a reserve of 10 retries a second over 10 s to an API that has sent nothing', () => {
    expect(withdrawAll(new RetryBudget(), 0)).toBe(100);
  });

  it('adds 20% of the exchanges sent within the window to the reserve', () => {
    const budget = new RetryBudget();
    for (let i = 0; i < 1000; i += 1) budget.noteExchange(i);
    expect(withdrawAll(budget, 1000)).toBe(300);
    // Spent: nothing more until exchanges are sent, one retry for each five.
    for (let i = 0; i < 5; i += 1) budget.noteExchange(1001);
    expect(withdrawAll(budget, 1001)).toBe(1);
  });

  it('bounds the retries of a fleet that fails everything to 20% of its load and 10 a second', () => {
    const budget = new RetryBudget();
    let sent = 0;
    let retried = 0;
    // 100 exchanges a second for a minute, each failed and asked to be sent again.
    for (let ms = 0; ms < 60_000; ms += 10) {
      budget.noteExchange(ms);
      sent += 1;
      if (budget.withdraw(ms)) retried += 1;
    }
    // 20% of the load plus the reserve of 10 a second: 30 a second at most.
    expect(retried / sent).toBeLessThanOrEqual(0.3);
    expect(retried / sent).toBeGreaterThan(0.2);
  });

  it('lets what was sent and retried slide out of the window', () => {
    const budget = new RetryBudget();
    expect(withdrawAll(budget, 0)).toBe(100);
    // Halfway through the next window, half of the last one's retries still count.
    expect(withdrawAll(budget, 15_000)).toBe(50);
    // Two windows later, nothing of them counts.
    expect(withdrawAll(budget, 40_000)).toBe(100);
  });
});
