import { describe, expect, it } from 'vitest';
import { integerText } from '../../src/kit/integer-text.js';

describe('integerText', () => {
  it('writes what String writes, at the boundaries of a small integer, a billion and a safe integer', () => {
    const values = [
      0,
      7,
      2 ** 31 - 1,
      2 ** 31,
      999_999_999_999,
      1_000_000_000_000,
      1_000_000_000_001,
      900_000_000_000_000,
      899_999_999_999_999,
      Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER - 1_000_000_000,
    ];
    for (const value of values) expect(integerText(value)).toBe(String(value));
  });

  it('writes what String writes for every integer near each multiple of a billion up to 2^53', () => {
    for (let billions = 2; billions < 2 ** 53 / 1e9; billions = Math.ceil(billions * 1.37)) {
      for (const offset of [-2, -1, 0, 1, 2]) {
        const value = billions * 1e9 + offset;
        expect(integerText(value)).toBe(String(value));
      }
    }
  });

  it('leaves what is not a safe non-negative integer to String', () => {
    for (const value of [-1, -(2 ** 40), 1.5, 2 ** 40 + 0.5, 2 ** 60, Infinity, NaN]) {
      expect(integerText(value)).toBe(String(value));
    }
  });
});
