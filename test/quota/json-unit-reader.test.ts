import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bodyUnitsReader, type AnswerHead, type BodyUnitsReader } from '../../src/quota/body-units.js';
import { deepestJsonNesting, JsonUnitReader, mostHeld } from '../../src/quota/json-unit-reader.js';
import { parseUnitPaths, UnitTally, type UnitPaths } from '../../src/quota/unit-paths.js';
import { chunkings, llmAnswers } from '../helpers/llm-answers.js';

/**
 * A JSON answer read for its units as it streams, whatever its size (issue 42, point 16): the reader
 * finds the paths wherever they are, reads as JSON.parse would, and keeps none of the answer.
 */
const openai = parseUnitPaths('usage.total_tokens');
const json: AnswerHead = { contentType: 'application/json', contentEncoding: undefined };

function readerOf(paths: UnitPaths): BodyUnitsReader {
  const reader = bodyUnitsReader(paths, json);
  if (reader === null) throw new Error('no reader for JSON');
  return reader;
}

/** The units a JSON answer that came in `chunks` says. */
function unitsOf(chunks: readonly (Buffer | string)[], paths: UnitPaths = openai): number | null {
  const reader = readerOf(paths);
  for (const chunk of chunks) reader.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return reader.end();
}

/** What JSON.parse and the tally of parsed values say `text` holds at `paths`: the reference. */
function parsedUnits(text: Buffer, paths: UnitPaths): number | null {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(text));
  } catch {
    return null;
  }
  const tally = new UnitTally(paths);
  tally.read(value);
  return tally.total();
}

/** An OpenAI-shaped answer of about `mib` MiB of choices, with its usage first or last. */
function largeAnswer(mib: number, usage: 'first' | 'last'): Buffer {
  const choice = {
    index: 0,
    message: { role: 'assistant', content: 'a "quoted" {brace} [bracket] \\ é 😀 '.repeat(40) },
    logprobs: { content: [{ token: '}', logprob: -0.1, bytes: [125], top_logprobs: [] }] },
  };
  const choices = Array.from(
    { length: Math.ceil((mib * 1_048_576) / JSON.stringify(choice).length) },
    (_, index) => ({ ...choice, index }),
  );
  const total = { usage: { prompt_tokens: 11, completion_tokens: 20, total_tokens: 31 } };
  return Buffer.from(
    JSON.stringify(usage === 'first' ? { ...total, id: 'x', choices } : { id: 'x', choices, ...total }),
  );
}

/** `bytes` in chunks of `size` bytes, as a socket hands them on. */
function sliced(bytes: Buffer, size: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
  return chunks;
}

describe('a JSON answer larger than any buffer', () => {
  it.each(['first', 'last'] as const)('is charged the usage of a 5 MiB answer that says it %s', (usage) => {
    const answer = largeAnswer(5, usage);
    expect(answer.length).toBeGreaterThan(5 * 1_048_576);
    expect(unitsOf(sliced(answer, 65_536))).toBe(31);
    expect(unitsOf(sliced(answer, 1_000))).toBe(31);
  });

  it('is unreadable when it is malformed anywhere, at its start or after its usage', () => {
    const answer = largeAnswer(5, 'first');
    const broken = Buffer.from(answer);
    broken[broken.length - 100] = 0x0a; // a raw line feed inside a string
    expect(unitsOf(sliced(broken, 65_536))).toBeNull();
    expect(unitsOf(sliced(answer.subarray(0, -1), 65_536))).toBeNull();
    expect(unitsOf([Buffer.from('x'), answer])).toBeNull();
  });

  it('keeps no chunk: zeroing every chunk once it was pushed changes nothing', () => {
    for (const usage of ['first', 'last'] as const) {
      const reader = readerOf(openai);
      for (const chunk of sliced(Buffer.from(largeAnswer(1, usage)), 4_096)) {
        reader.push(chunk);
        chunk.fill(0);
      }
      expect(reader.end()).toBe(31);
    }
  });

  it('holds no more after a 5 MiB string than before it, and never more than its bound', () => {
    const reader = new JsonUnitReader(openai);
    reader.push(Buffer.from('{"usage":{"total_tokens":31},"content":"'));
    const held = reader.held;
    const text = Buffer.alloc(65_536, 'x');
    for (let pushed = 0; pushed < 5 * 1_048_576; pushed += text.length) reader.push(text);
    reader.push(Buffer.from('"}'));
    expect(reader.held).toBe(held);
    expect(reader.end()).toBe(31);
    // Nested as deep as it reads, with the longest key and number it keeps: the bound, not past it.
    const deepest = new JsonUnitReader(openai);
    deepest.push(Buffer.from(`{"usage":{"${'k'.repeat(100)}":${'1'.repeat(100)},"a":`));
    deepest.push(Buffer.from('['.repeat(deepestJsonNesting)));
    expect(deepest.held).toBeLessThanOrEqual(mostHeld);
    expect(mostHeld).toBeLessThan(1_300);
  });
});

describe('the JSON answer reader', () => {
  it('reads only the paths of the document: not a string, an array element or a nested object that looks like them', () => {
    const answer = JSON.stringify({
      content: '{"usage":{"total_tokens":999}} \\" \\\\" }]',
      choices: [{ usage: { total_tokens: 500 } }, [[{ usage: { total_tokens: 501 } }]]],
      nested: { usage: { total_tokens: 502 } },
      'us"age': { total_tokens: 503 },
      usage: { total_tokens_: 504, total_tokens: 31, x: [{ total_tokens: 505 }] },
    });
    expect(parsedUnits(Buffer.from(answer), openai)).toBe(31);
    const different = chunkings(Buffer.from(answer))
      .filter(([, chunks]) => unitsOf(chunks) !== 31)
      .map(([way]) => way);
    expect(different).toEqual([]);
  });

  it('keeps the last of repeated keys, as JSON.parse does, below them too', () => {
    expect(unitsOf(['{"usage":{"total_tokens":5},"usage":{"prompt_tokens":1}}'])).toBeNull();
    expect(unitsOf(['{"usage":{"total_tokens":5,"total_tokens":null}}'])).toBeNull();
    expect(unitsOf(['{"usage":{"total_tokens":5},"usage":{"total_tokens":6}}'])).toBe(6);
    expect(unitsOf(['{"usage":7,"usage":{"total_tokens":6}}'])).toBe(6);
  });

  it('reads a key spelt with escapes as JSON.parse does', () => {
    expect(unitsOf(['{"\\u0075sage":{"total\\u005ftokens":12}}'])).toBe(12);
    expect(unitsOf(['{"usage\\u0000":{"total_tokens":12}}'])).toBeNull();
  });

  it.each([
    ['2.9e1', 29],
    ['29.0', 29],
    ['0', 0],
    ['-0', 0],
    ['999999999999999', 999_999_999_999_999],
  ])('reads the number %s as %s', (number, units) => {
    expect(unitsOf([`{"usage":{"total_tokens":${number}}}`])).toBe(units);
  });

  it.each([
    ['a number written longer than 64 characters', `29.${'0'.repeat(62)}`],
    ['true', 'true'],
    ['an object', '{}'],
    ['an array', '[29]'],
  ])('takes %s at a path for no whole number', (_name, value) => {
    expect(unitsOf([`{"usage":{"total_tokens":${value}}}`])).toBeNull();
  });

  it.each([
    ['a leading zero', '{"a":01}'],
    ['a point without digits', '{"a":1.}'],
    ['a bare minus', '{"a":-}'],
    ['an exponent without digits', '{"a":1e+}'],
    ['a trailing comma', '{"a":[1,],"usage":{"total_tokens":1}}'],
    ['an unknown escape', '{"a":"\\x","usage":{"total_tokens":1}}'],
    ['a short unicode escape', '{"a":"\\u12g4","usage":{"total_tokens":1}}'],
    ['a tab inside a string', '{"a":"\t","usage":{"total_tokens":1}}'],
    ['U+001F inside a string', '{"a":"\u001f","usage":{"total_tokens":1}}'],
    ['brackets that do not match', '{"a":[1},"usage":{"total_tokens":1}}'],
    ['a key without a colon', '{"usage" {"total_tokens":1}}'],
    ['a misspelt literal', '{"a":nul,"usage":{"total_tokens":1}}'],
    ['single quotes', "{'usage':{'total_tokens':1}}"],
    ['two documents', '{"usage":{"total_tokens":1}}{}'],
    ['nothing', ''],
    ['white space alone', ' \n'],
  ])('is unreadable with %s', (_name, answer) => {
    expect(unitsOf([answer])).toBeNull();
  });

  it.each([
    ['a lone continuation byte', [0x80]],
    ['an overlong two-byte form', [0xc0, 0xaf]],
    ['an overlong three-byte form', [0xe0, 0x80, 0xaf]],
    ['a surrogate', [0xed, 0xa0, 0x80]],
    ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['a sequence cut short', [0xe2, 0x82]],
    ['a byte that is never UTF-8', [0xff]],
  ])('is unreadable with %s in a string, as a strict UTF-8 decoder is', (_name, bytes) => {
    const answer = Buffer.concat([
      Buffer.from('{"a":"'),
      Buffer.from(bytes),
      Buffer.from('","usage":{"total_tokens":1}}'),
    ]);
    expect(parsedUnits(answer, openai)).toBeNull();
    expect(unitsOf([answer])).toBeNull();
  });

  it(`reads containers nested ${deepestJsonNesting} deep, and no deeper`, () => {
    const nested = (depth: number) =>
      `{"usage":{"total_tokens":3},"a":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;
    expect(unitsOf([nested(deepestJsonNesting)])).toBe(3);
    expect(unitsOf([nested(deepestJsonNesting + 1)])).toBeNull();
  });

  it('says what JSON.parse says of any JSON text, repeated keys included, cut anywhere', () => {
    const paths = parseUnitPaths(['a', 'b.c', 'b.d.e']);
    const key = fc.constantFrom('"a"', '"b"', '"c"', '"d"', '"e"', '"x"', '"\\u0062"');
    const space = fc.constantFrom('', ' ', '\n\t');
    // JSON texts written out by hand: an object may repeat a key, which JSON.stringify never writes.
    const value: fc.Arbitrary<string> = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.nat({ max: 50 }).map(String),
        fc.constantFrom('null', 'true', '-1', '1.5', '2E1', '"7"', '"}{"', '"é\\"\\\\"'),
        fc
          .array(fc.tuple(key, space, tie('value')), { maxLength: 4 })
          .map((members) => `{${members.map(([name, gap, member]) => `${name}:${gap}${member}`).join(',')}}`),
        fc.array(tie('value'), { maxLength: 3 }).map((elements) => `[${elements.join(', ')}]`),
      ),
    })).value;
    fc.assert(
      fc.property(value, fc.nat(), (document, cutAt) => {
        const text = Buffer.from(document);
        const at = cutAt % (text.length + 1);
        expect(unitsOf([text.subarray(0, at), text.subarray(at)], paths)).toBe(parsedUnits(text, paths));
      }),
      { numRuns: 2_000 },
    );
  });

  it('says what JSON.parse says of text that is almost JSON', () => {
    const paths = parseUnitPaths('usage.total_tokens');
    const piece = fc.constantFrom(
      '{',
      '}',
      '[',
      ']',
      ',',
      ':',
      ' ',
      '"usage"',
      '"total_tokens"',
      '"x"',
      '12',
      '-0',
      '1e2',
      'null',
      'true',
      '"\\u0041"',
      '"\u001f"',
      '"\x7f"',
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 14 }), (pieces) => {
        const text = Buffer.from(pieces.join(''));
        expect(unitsOf([text], paths)).toBe(parsedUnits(text, paths));
      }),
      { numRuns: 5_000 },
    );
  });

  it('reads the byte order mark a decoder drops, at the start only', () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    expect(unitsOf([bom.subarray(0, 1), bom.subarray(1), llmAnswers.openaiJson])).toBe(29);
    expect(unitsOf([Buffer.from(' '), bom, llmAnswers.openaiJson])).toBeNull();
  });
});

describe('a JSON answer cut before its end', () => {
  const cut = (text: string) => {
    const reader = readerOf(openai);
    reader.push(Buffer.from(text));
    return reader.saidSoFar();
  };

  it('says the usage it said before the cut', () => {
    expect(cut('{"usage":{"total_tokens":31},"choices":[{"message":{"content":"hal')).toBe(31);
  });

  it('says nothing when the cut came before its usage, or within the number', () => {
    expect(cut('{"choices":[{"message":{"content":"hal')).toBeNull();
    expect(cut('{"usage":{"total_tokens":3')).toBeNull();
  });

  it('says nothing when what came was not JSON', () => {
    expect(cut('{"usage":{"total_tokens":31}, oops')).toBeNull();
  });
});
