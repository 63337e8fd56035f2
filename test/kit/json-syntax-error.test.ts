import { describe, expect, it } from 'vitest';
import { jsonSyntaxError } from '../../src/kit/json-syntax-error.js';

const parses = (text: string) => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

const sample = JSON.stringify(
  {
    type: 'API',
    name: 'Pets "and" \\ friends \u00e9',
    restrictions: [
      { api: '*', method: '*', config: { messages: -1.5e3, per: 0, on: true, off: false, none: null } },
    ],
    empty: [{}, []],
  },
  null,
  2,
);

/** Every text one edit away from `text`: each character dropped, doubled, or replaced by each of `by`. */
function oneEditAway(text: string, by: readonly string[]): string[] {
  const texts: string[] = [];
  for (let at = 0; at < text.length; at += 1) {
    texts.push(text.slice(0, at) + text.slice(at + 1), text.slice(0, at + 1) + text.slice(at));
    for (const char of by) texts.push(text.slice(0, at) + char + text.slice(at + 1));
  }
  return texts;
}

describe('jsonSyntaxError', () => {
  it('agrees with JSON.parse on every text one edit away from a JSON document', () => {
    const texts = oneEditAway(sample, [
      '"',
      ',',
      ':',
      '}',
      ']',
      '{',
      '[',
      '\\',
      'x',
      '0',
      '-',
      '.',
      'e',
      '\n',
      '\u0001',
    ]);
    const disagreements = texts.filter((text) => (jsonSyntaxError(text) === null) !== parses(text));
    expect(disagreements).toEqual([]);
    expect(texts.filter(parses).length).toBeGreaterThan(0);
    expect(texts.filter((text) => !parses(text)).length).toBeGreaterThan(1000);
  });

  it('says the line, the column and the offset, counting from the start of the text', () => {
    expect(jsonSyntaxError('{\n  "a": 1\n  "b": 2\n}')).toEqual({
      reason: "expected ',' or '}'",
      offset: 13,
      line: 3,
      column: 3,
    });
  });

  it('follows nesting deeper than the stack would', () => {
    const depth = 200_000;
    expect(jsonSyntaxError(`${'['.repeat(depth)}${']'.repeat(depth)}`)).toBeNull();
    expect(jsonSyntaxError(`${'['.repeat(depth)}${']'.repeat(depth - 1)}`)).toMatchObject({
      reason: 'it ends too soon',
      offset: 2 * depth - 1,
    });
  });

  it('never quotes the text in its reason', () => {
    const secret = 'kT3-very-secret-key-0123456789';
    const reasons = oneEditAway(`{"key": "${secret}"}`, ['x', '"'])
      .map((text) => jsonSyntaxError(text)?.reason ?? '')
      .filter((reason) => reason.includes('kT3') || reason.includes('secret'));
    expect(reasons).toEqual([]);
  });
});
