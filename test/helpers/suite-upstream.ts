import { afterAll, beforeAll } from 'vitest';

/**
 * Registers the hooks of a suite that shares one upstream: `start` runs before its tests, and what it
 * started is closed after them. The getter answers that upstream while the tests run.
 */
export function useSuiteUpstream<T extends { close(): Promise<void> }>(start: () => Promise<T>): () => T {
  let upstream: T | undefined;
  beforeAll(async () => {
    upstream = await start();
  });
  afterAll(() => upstream?.close());
  return () => {
    if (!upstream) throw new Error('the suite upstream is used outside the tests of its suite');
    return upstream;
  };
}
