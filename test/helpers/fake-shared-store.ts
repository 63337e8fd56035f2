import type {
  CounterAddition,
  CounterSpec,
  CounterState,
  CounterUsage,
  Decision,
} from '../../src/limiter/counter-store.js';
import { Limiter, type OnError, type SharedCounters } from '../../src/limiter/limiter.js';
import { MemoryCounterStore } from '../../src/limiter/memory-counter-store.js';
import type { OutageThresholds } from '../../src/limiter/outage-detector.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { FakeClock } from './fake-clock.js';
import { capturingLogger } from './log-capture.js';

/**
 * A shared store whose answers a test gives (and withholds) by hand, to drive the limiter's switch →
 * fallback → recovery on a fake clock. Nothing it is asked is answered by itself.
 */
export class FakeSharedStore implements SharedCounters {
  readonly asked: Array<{
    specs: readonly CounterSpec[];
    answer: (decision: Decision) => void;
    fail: (error: Error) => void;
  }> = [];
  readonly added: CounterAddition[][] = [];
  /** What each `resume` was handed, in order: the store keeps it whether or not it could send it. */
  readonly handedBack: CounterAddition[][] = [];
  /** Slots counted in by `hold`, and freed by `release`, one key each, in order. */
  readonly held: string[] = [];
  readonly released: string[] = [];
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

  async resume(alone: readonly CounterAddition[]): Promise<void> {
    this.handedBack.push([...alone]);
    if (this.failAdds) throw new Error('connection closed');
    this.suspended = false;
  }

  hold(keys: readonly string[]): void {
    this.held.push(...keys);
  }

  release(keys: readonly string[]): void {
    this.released.push(...keys);
  }

  lastKnown() {
    return this.known;
  }
}

/** A limiter over a `FakeSharedStore` on a fake clock, with a PING whose answer the test sets. */
export function limiterOverFakeStore(
  onError: OnError,
  options: { live?: number; rank?: number; outage?: OutageThresholds } = {},
) {
  const clock = new FakeClock();
  const shared = new FakeSharedStore();
  const local = new MemoryCounterStore({ now: clock.now });
  let pingAnswers: boolean | 'never' = true;
  const { lines, logger } = capturingLogger();
  const live = options.live ?? 1;
  const metrics = createMetrics({ sharedCounters: true });
  const limiter = new Limiter({
    shared,
    local,
    onError,
    timeoutMs: 50,
    probeEveryMs: 250,
    clock,
    probe: () => (pingAnswers === 'never' ? new Promise(() => undefined) : Promise.resolve(pingAnswers)),
    // limit ÷ live, the remainder to the first ranks, as the heartbeat does.
    shareOf: (limit) => Math.floor(limit / live) + ((options.rank ?? 0) < limit % live ? 1 : 0),
    ...(options.outage ? { outage: options.outage } : {}),
    logger,
    metrics,
  });
  return {
    clock,
    shared,
    local,
    limiter,
    lines,
    metrics,
    setPing: (answer: boolean | 'never') => (pingAnswers = answer),
  };
}
