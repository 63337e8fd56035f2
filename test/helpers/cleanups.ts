import { afterEach } from 'vitest';

/**
 * Registers an `afterEach` that runs what each test deferred, newest first (a gateway closes before the
 * upstream it stood in front of), and returns the function that defers.
 */
export function cleanupAfterEach(): (cleanup: () => Promise<void> | void) => void {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return (cleanup) => {
    cleanups.push(cleanup);
  };
}
