/** What `beforeDeadline` resolves with when the time ran out first. */
export const deadlinePassed = Symbol('deadline passed');

/**
 * Resolves with `work`'s value, or with `deadlinePassed` after `ms` milliseconds, whichever comes first.
 * `work` goes on in the background; its late rejection is absorbed here.
 */
export function beforeDeadline<T>(work: Promise<T>, ms: number): Promise<T | typeof deadlinePassed> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<typeof deadlinePassed>((resolve) => {
    timer = setTimeout(() => resolve(deadlinePassed), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
