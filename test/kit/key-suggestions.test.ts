import { describe, expect, it } from 'vitest';
import { nearMiss } from '../../src/kit/key-suggestions.js';
import { periodNames } from '../../src/quota/quota-terms.js';
import { authTypes, verbs } from '../../src/config/schema.js';

describe('the known name an unknown one most likely misspells', () => {
  it.each([
    ['secs', 'seconds'],
    ['sec', 'second'],
    ['mins', 'minutes'],
    ['min', 'minute'],
    ['hrs', 'hours'],
    ['hr', 'hour'],
    ['wk', 'week'],
    ['wks', 'weeks'],
    ['Seconds', 'seconds'],
    ['minuets', 'minutes'],
  ])('takes the period %s for %s', (given, meant) => {
    expect(nearMiss(given, periodNames)).toBe(meant);
  });

  it.each([
    ['JWT', authTypes, 'jwt'],
    ['basik', authTypes, 'basic'],
    ['DEL', verbs, 'DELETE'],
    ['prot', ['port', 'admin'], 'port'],
  ])('takes %s for the one it misspells', (given, known, meant) => {
    expect(nearMiss(given, known)).toBe(meant);
  });

  it.each([
    ['s', periodNames],
    ['fortnight', periodNames],
    ['xyz', authTypes],
    ['prx', ['proxyTimeout', 'port']],
    ['FETCH', verbs],
  ])('suggests nothing for %s', (given, known) => {
    expect(nearMiss(given, known)).toBeUndefined();
  });
});
