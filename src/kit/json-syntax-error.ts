/** Where a text stops being JSON, and why: `offset` counts UTF-16 code units from 0, `line` and `column` from 1. */
export interface JsonSyntaxError {
  reason: string;
  offset: number;
  line: number;
  column: number;
}

type Expected = 'value' | 'firstValue' | 'key' | 'firstKey' | 'colon' | 'next';

/** Where a string or scalar goes wrong, and why. */
type Mistake = { at: number; reason: string };

const space = new Set([' ', '\t', '\n', '\r']);
const number = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const escape = /\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/y;

/**
 * Where `text` stops being JSON (RFC 8259), or null when it is JSON. JSON.parse says where only in some
 * of its messages, and others quote the text itself (a body may hold a secret): this scanner says where
 * for every mistake, in words of its own. It keeps its nesting in a list, so no depth overflows it.
 */
export function jsonSyntaxError(text: string): JsonSyntaxError | null {
  const open: Array<'{' | '['> = [];
  let at = 0;
  let expected: Expected = 'value';
  const fail = (reason: string): JsonSyntaxError => {
    const lineStart = text.lastIndexOf('\n', at - 1) + 1;
    const line = text.slice(0, lineStart).split('\n').length;
    return { reason, offset: at, line, column: at - lineStart + 1 };
  };
  /** Moves past a string or scalar that ends at `end`, or says why there is none. */
  const pass = (end: number | Mistake): JsonSyntaxError | null => {
    if (typeof end !== 'number') {
      at = end.at;
      return fail(end.reason);
    }
    at = end;
    return null;
  };
  for (;;) {
    while (at < text.length && space.has(text[at]!)) at += 1;
    if (at === text.length) return expected === 'next' && open.length === 0 ? null : fail('it ends too soon');
    const char = text[at]!;
    switch (expected) {
      case 'firstValue':
      case 'value':
        if (expected === 'firstValue' && char === ']') {
          open.pop();
          at += 1;
          expected = 'next';
        } else if (char === '{' || char === '[') {
          open.push(char);
          at += 1;
          expected = char === '{' ? 'firstKey' : 'firstValue';
        } else {
          const mistake = pass(char === '"' ? stringEnd(text, at) : scalarEnd(text, at));
          if (mistake) return mistake;
          expected = 'next';
        }
        break;
      case 'firstKey':
      case 'key': {
        if (expected === 'firstKey' && char === '}') {
          open.pop();
          at += 1;
          expected = 'next';
          break;
        }
        if (char !== '"') return fail('expected a property name in double quotes');
        const mistake = pass(stringEnd(text, at));
        if (mistake) return mistake;
        expected = 'colon';
        break;
      }
      case 'colon':
        if (char !== ':') return fail("expected ':' after the property name");
        at += 1;
        expected = 'value';
        break;
      case 'next': {
        const container = open.at(-1);
        if (container === undefined) return fail('expected nothing after the value');
        const close = container === '{' ? '}' : ']';
        if (char === ',') expected = container === '{' ? 'key' : 'value';
        else if (char === close) open.pop();
        else return fail(`expected ',' or '${close}'`);
        at += 1;
        break;
      }
    }
  }
}

/** The offset after the string that starts at `start`, or where and why it is no string. */
function stringEnd(text: string, start: number): number | Mistake {
  let at = start + 1;
  while (at < text.length) {
    const char = text[at]!;
    if (char === '"') return at + 1;
    if (char === '\\') {
      escape.lastIndex = at;
      if (!escape.test(text)) return { at, reason: 'a string holds an escape JSON does not have' };
      at = escape.lastIndex;
    } else if (char < ' ') {
      return { at, reason: 'a string holds a control character (escape it)' };
    } else {
      at += 1;
    }
  }
  return { at, reason: 'it ends too soon' };
}

/** The offset after the number, true, false or null at `start`, or where and why there is none. */
function scalarEnd(text: string, start: number): number | Mistake {
  for (const word of ['true', 'false', 'null']) if (text.startsWith(word, start)) return start + word.length;
  number.lastIndex = start;
  return number.test(text) ? number.lastIndex : { at: start, reason: 'expected a value' };
}
