import type { Trip } from '../../src/limiter/counter-trips.js';

/** A trip of one gateway alone in its fleet that carries only `parts`. */
export const trip = (parts: Partial<Trip>): Trip => ({
  checks: [],
  additions: [],
  giveBacks: [],
  live: 1,
  ...parts,
});
