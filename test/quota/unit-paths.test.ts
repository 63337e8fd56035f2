import { describe, expect, it } from 'vitest';
import {
  mayHoldUnits,
  parseUnitPaths,
  unitPathRule,
  unitPathsProblem,
  UnitTally,
} from '../../src/quota/unit-paths.js';

describe('unitPathsProblem', () => {
  it.each([
    ['usage.total_tokens'],
    ['total_tokens'],
    ['message.usage.input_tokens'],
    ['x-usage.a_b.0'],
    [['message.usage.input_tokens', 'usage.output_tokens']],
    [['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']],
  ])('accepts %j', (paths) => {
    expect(unitPathsProblem(paths)).toBeUndefined();
  });

  it.each([
    ['', unitPathRule],
    ['.usage', unitPathRule],
    ['usage.', unitPathRule],
    ['usage..total_tokens', unitPathRule],
    ['usage total', unitPathRule],
    ['usage[0]', unitPathRule],
    ['$.usage.total_tokens', unitPathRule],
    ['usage/total', unitPathRule],
    ['ü', unitPathRule],
    [Array.from({ length: 17 }, () => 'a').join('.'), unitPathRule],
    ['a'.repeat(65), unitPathRule],
    [[], 'must list 1 to 8 paths'],
    [['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'], 'must list 1 to 8 paths'],
    [['usage.input_tokens', 'usage..output_tokens'], `[1]: ${unitPathRule}`],
    [['usage.total_tokens', 'usage.total_tokens'], '[1]: lists usage.total_tokens a second time'],
  ])('refuses %j: %s', (paths, problem) => {
    expect(unitPathsProblem(paths)).toBe(problem);
  });

  it('accepts the longest path, 16 names of 64 characters', () => {
    expect(unitPathsProblem(Array.from({ length: 16 }, () => 'a'.repeat(64)).join('.'))).toBeUndefined();
  });
});

describe('parseUnitPaths', () => {
  it('splits each path into its property names, and keeps the text', () => {
    const paths = parseUnitPaths(['message.usage.input_tokens', 'usage.output_tokens']);
    expect(paths.names).toEqual([
      ['message', 'usage', 'input_tokens'],
      ['usage', 'output_tokens'],
    ]);
    expect(paths.text).toEqual(['message.usage.input_tokens', 'usage.output_tokens']);
    expect(Object.isFrozen(paths)).toBe(true);
  });

  it('throws a TypeError on paths the schema should have refused', () => {
    expect(() => parseUnitPaths('usage..x')).toThrow(new TypeError(`unit paths "usage..x": ${unitPathRule}`));
  });
});

describe('mayHoldUnits', () => {
  const paths = parseUnitPaths(['message.usage.input_tokens', 'usage.output_tokens']);
  const holds = (json: string) => mayHoldUnits(paths, Buffer.from(json));

  it.each([
    '{"usage":{"output_tokens":15}}',
    '{"type":"message_start","message":{"usage":{}}}',
    '{ "usage" :\r\n\t{ } }',
    '{"x":{"usage":1}}',
    '{"usage":null,"usage":{"output_tokens":1}}',
    '{"usage":"12"}',
  ])('lets %s be parsed', (json) => {
    expect(holds(json)).toBe(true);
  });

  it.each([
    '{"usage":null}',
    '{"usage" : null, "choices":[]}',
    '{"type":"usage"}',
    '{"text":"\\"usage\\": 5"}',
    '{"usages":{"output_tokens":15}}',
    '{"type":"content_block_delta","delta":{"text":"usage: message"}}',
    '[DONE]',
    '{"usage":',
    '',
  ])('spares %s a parse', (json) => {
    expect(holds(json)).toBe(false);
  });
});

describe('UnitTally', () => {
  const tallyOf = (paths: string | string[], ...values: unknown[]): number | null => {
    const tally = new UnitTally(parseUnitPaths(paths));
    for (const value of values) tally.read(value);
    return tally.total();
  };

  it('adds the last value of each path', () => {
    const anthropic = ['message.usage.input_tokens', 'usage.output_tokens'];
    const start = { message: { usage: { input_tokens: 25, output_tokens: 1 } } };
    expect(tallyOf(anthropic, start, { usage: { output_tokens: 3 } }, { usage: { output_tokens: 15 } })).toBe(
      40,
    );
  });

  it('takes no value from null or an absent path: the last value said stays', () => {
    expect(tallyOf('usage.total_tokens', { usage: { total_tokens: 21 } }, { usage: null }, {}, [])).toBe(21);
  });

  it('adds what the paths that said a value said, and is null when none did', () => {
    expect(tallyOf(['usage.input_tokens', 'usage.output_tokens'], { usage: { input_tokens: 25 } })).toBe(25);
    expect(tallyOf(['usage.input_tokens', 'usage.output_tokens'], { usage: {} }, { other: 1 })).toBeNull();
    expect(tallyOf('usage.total_tokens')).toBeNull();
  });

  it.each([1.5, '29', -1, 1e15, Number.MAX_SAFE_INTEGER + 2, true, {}, [29]])(
    'is null when a path last said %j, not a whole number from 0 to 999999999999999',
    (value) => {
      expect(tallyOf('usage.total_tokens', { usage: { total_tokens: value } })).toBeNull();
      expect(
        tallyOf('usage.total_tokens', { usage: { total_tokens: 3 } }, { usage: { total_tokens: value } }),
      ).toBeNull();
      expect(
        tallyOf('usage.total_tokens', { usage: { total_tokens: value } }, { usage: { total_tokens: 3 } }),
      ).toBe(3);
    },
  );

  it('counts 0, 999999999999999 and a whole number written 29.0', () => {
    expect(tallyOf('n', { n: 0 })).toBe(0);
    expect(tallyOf('n', { n: 999_999_999_999_999 })).toBe(999_999_999_999_999);
    expect(tallyOf('n', JSON.parse('{"n":29.0}'))).toBe(29);
  });

  it('adds up to 999999999999999 at most', () => {
    const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    const all = Object.fromEntries(names.map((name) => [name, 999_999_999_999_999]));
    expect(tallyOf(names, all)).toBe(999_999_999_999_999);
  });

  it('walks objects only: no array index, no inherited property, no value inside a scalar', () => {
    expect(tallyOf('choices.0.n', { choices: [{ n: 1 }] })).toBeNull();
    expect(tallyOf('length', [1, 2])).toBeNull();
    expect(tallyOf('toString.length', {})).toBeNull();
    expect(tallyOf('constructor.length', {})).toBeNull();
    expect(tallyOf('usage.total_tokens', { usage: 'total_tokens' }, 'usage', 12, null)).toBeNull();
  });
});
