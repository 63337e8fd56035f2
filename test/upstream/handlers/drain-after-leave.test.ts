import { describe, expect, it } from 'vitest';
import { AnswerDrains } from '../../../src/upstream/handlers/drain-after-leave.js';

/** A read that notes when it was cut, in `cuts`. */
const read = (name: string, cuts: string[]) => ({ name, cutReading: () => cuts.push(name) });

describe('AnswerDrains', () => {
  it('cuts the oldest read once a new one passes the limit, and counts it', () => {
    const cuts: string[] = [];
    let counted = 0;
    const drains = new AnswerDrains(2, () => (counted += 1));
    for (const name of ['a', 'b']) drains.add(read(name, cuts));
    expect(cuts).toEqual([]);
    drains.add(read('c', cuts));
    expect(cuts).toEqual(['a']);
    expect(counted).toBe(1);
    expect(drains.size).toBe(2);
  });

  it('makes room for a read when one before it ended', () => {
    const cuts: string[] = [];
    const drains = new AnswerDrains(1);
    const first = read('a', cuts);
    drains.add(first);
    drains.delete(first);
    drains.add(read('b', cuts));
    expect(cuts).toEqual([]);
  });

  it('cuts every read past a lowered limit, oldest first, when the next one starts', () => {
    const cuts: string[] = [];
    const drains = new AnswerDrains(4);
    for (const name of ['a', 'b', 'c', 'd']) drains.add(read(name, cuts));
    drains.limit = 2;
    expect(cuts).toEqual([]);
    drains.add(read('e', cuts));
    expect(cuts).toEqual(['a', 'b', 'c']);
    expect(drains.size).toBe(2);
  });
});
