import { CalendarWindows, type CalendarSpec, type CalendarWindow } from '../kit/calendar-window.js';
import type { CounterSpec, CounterState, Decision } from './counter-store.js';
import type { CheckedCounter } from './counter-trips.js';

/** A counter resolved to the calendar window that holds now: the instant that window ends. */
export interface InWindow {
  windowStart?: number;
  windowEnd?: number;
}

/**
 * Calendar counters (a `calendar` on a counter) as the sliding counters the stores keep: the counter of
 * one window is keyed by its start, so the next window starts a new counter at zero exactly at its end,
 * and its length is twice the window's, so that no unit it counted leaves it before that end (a unit
 * leaves a sliding counter one length after it was counted, and every unit of a window is counted after
 * its start), whatever sub-bucket a store's clock puts it in. The window is read from the clock of the
 * store that resolves it (`now`), known in advance, so a boundary needs no trip.
 */
export class CalendarCounters {
  private readonly windows = new CalendarWindows();

  /** The window of `calendar` that holds `now`. */
  windowAt(calendar: CalendarSpec, now: number): CalendarWindow {
    return this.windows.at(calendar, now);
  }

  /** `counters` in the window of `now`: the same array when none is a calendar counter. */
  inWindow<T extends { key: string; windowMs: number; calendar?: CounterSpec['calendar'] }>(
    counters: readonly T[],
    now: number,
  ): ReadonlyArray<T & InWindow> {
    let resolved: Array<T & InWindow> | null = null;
    for (let i = 0; i < counters.length; i += 1) {
      const counter = counters[i]!;
      if (counter.calendar === undefined) continue;
      resolved ??= counters.slice();
      const { start, end } = this.windows.at(counter.calendar, now);
      const { calendar: _resolved, ...sliding } = counter;
      resolved[i] = {
        ...sliding,
        key: `${counter.key}@${start}`,
        windowMs: 2 * (end - start),
        windowStart: start,
        windowEnd: end,
      } as T & InWindow;
    }
    return resolved ?? (counters as ReadonlyArray<T & InWindow>);
  }
}

/**
 * A decision on counters some of which are calendar counters, in the calendar's terms: each one's reset
 * is its window's end, and a refusal waits until the end of the window of every full counter among them
 * (a sliding counter's wait is kept).
 */
export function calendarDecision(
  specs: ReadonlyArray<CounterSpec & InWindow>,
  decision: Decision,
  now: number,
): Decision {
  if (!specs.some((spec) => spec.windowEnd !== undefined) || decision.outOfRoom) return decision;
  const states = decision.states.map((state, i) => calendarState(specs[i]!, state.used, now) ?? state);
  let retryAfterMs = decision.retryAfterMs;
  if (!decision.allowed) {
    retryAfterMs = 0;
    states.forEach((state, i) => {
      const spec = specs[i]!;
      if (state.used + spec.need > spec.limit) retryAfterMs = Math.max(retryAfterMs, state.resetMs);
    });
  }
  return { ...decision, retryAfterMs, states };
}

/**
 * A trip's answer for a calendar counter: a lease never outlives the window it was counted in, and a
 * full counter waits until the window ends (`sentAt` and `now` on the clock that resolved the window).
 */
export function calendarCheck(
  spec: InWindow,
  checked: CheckedCounter,
  sentAt: number,
  now: number,
): CheckedCounter {
  const end = spec.windowEnd;
  if (end === undefined) return checked;
  return {
    ...checked,
    bucketLeftMs: Math.max(0, Math.min(checked.bucketLeftMs, end - sentAt)),
    waitMs: checked.waitMs > 0 ? Math.max(1, end - now) : 0,
  };
}

/** What a calendar counter holding `used` says at `now`: undefined for a sliding one. */
export function calendarState(spec: InWindow, used: number, now: number): CounterState | undefined {
  const { windowStart, windowEnd } = spec;
  if (windowStart === undefined || windowEnd === undefined) return undefined;
  return { used, resetMs: windowEnd - now, windowMs: windowEnd - windowStart, windowEnd };
}
