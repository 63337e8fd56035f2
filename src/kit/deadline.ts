import { systemClock, type Clock } from './clock.js';

/** What `beforeDeadline` resolves with when the time ran out first. */
export const deadlinePassed = Symbol('deadline passed');

/**
 * Resolves with `work`'s value, or with `deadlinePassed` after `ms` milliseconds, whichever comes first.
 * `work` goes on in the background; its late rejection is absorbed here.
 *
 * When the timer fires, the verdict waits one turn of the event loop (setImmediate): Node runs due timers
 * before it reads sockets, so on a busy process an answer that has already arrived would otherwise lose
 * to a timer that is merely late.
 */
export function beforeDeadline<T>(
  work: Promise<T>,
  ms: number,
  clock: Clock = systemClock,
): Promise<T | typeof deadlinePassed> {
  // One promise and one timer per call: this runs once per request on the Redis path.
  return new Promise((resolve, reject) => {
    const timer = clock.setTimeout(() => setImmediate(resolve, deadlinePassed), ms);
    work.then(
      (value) => {
        clock.clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clock.clearTimeout(timer);
        reject(error);
      },
    );
  });
}
