/**
 * The values a JSON answer (RFC 8259) holds at a `throttleunits` restriction's `body` paths, read as its
 * bytes stream past, without keeping the answer: a JSON answer of any size says its usage, wherever in
 * it the usage comes (OpenAI's puts it last, after choices whose size the client chooses with `n` and
 * `logprobs`).
 *
 * A tokenizer that checks the whole document as JSON.parse would (structure, strings, escapes, numbers,
 * UTF-8) and keeps only what a path needs: the nesting of its containers, the name of a key while it may
 * be a path's, the digits of a number at a path. Everything it keeps is in four arrays of bounded
 * length (`mostHeld` entries in all): strings, however long, are passed over.
 *
 * It reads as JSON.parse and `UnitTally` read the parsed value: a key's last value wins (a repeated key
 * replaces what the one before said, below it too), `null` says nothing, any value but a whole number
 * from 0 to 999999999999999 is a wrong one. Two bounds of its own: containers nested deeper than
 * `deepestJsonNesting` make the document unreadable, and a number at a path written with more than 64
 * characters is a wrong value.
 */
import { isUnits, unitsTotal, type PathValue, type UnitPaths } from './unit-paths.js';

/** Containers nested deeper than this make a JSON answer unreadable. */
export const deepestJsonNesting = 1_024;
/** Characters of a number at a path that are kept to read it. */
const longestNumber = 64;
/** Characters of a key that are kept to match it: a path's names have at most 64. */
const longestName = 64;
/** Property names in a path, at most (`unitPathSyntax`). */
const mostNames = 16;
/** Entries the reader's arrays hold at most, whatever it reads. */
export const mostHeld = deepestJsonNesting + mostNames + 2 + longestName + longestNumber;

// Where the reader is in the document.
/** Before the first byte: a byte order mark may come. */
const START = 0;
/** Within a byte order mark (EF BB BF), which a decoder of UTF-8 drops. */
const BYTE_ORDER_MARK = 1;
/** A value must come: the document's, a member's after its `:`, an element's after a `,`. */
const VALUE = 2;
/** After `[`: an element or `]`. */
const FIRST_ELEMENT = 3;
/** After `{`: a key or `}`. */
const FIRST_KEY = 4;
/** After a `,` in an object: a key. */
const KEY = 5;
/** After a key: its `:`. */
const COLON = 6;
/** After a value: a `,` or the end of its container; at the top, white space alone. */
const AFTER_VALUE = 7;
const STRING = 8;
/** After a `\` in a string. */
const ESCAPE = 9;
/** Within the four hex digits of a `\u` escape. */
const UNICODE = 10;
/** Within a character of several bytes in a string. */
const CONTINUATION = 11;
// A number, as RFC 8259 §6 writes it: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
const MINUS = 12;
const ZERO = 13;
const INTEGER = 14;
const POINT = 15;
const FRACTION = 16;
const EXPONENT_MARK = 17;
const EXPONENT_SIGN = 18;
const EXPONENT = 19;
/** Within `true`, `false` or `null`. */
const LITERAL = 20;
/** Not JSON: nothing more is read. */
const MALFORMED = 21;

const OBJECT = 1;
const ARRAY = 2;

const quote = 0x22;
const backslash = 0x5c;
const literals: Readonly<Record<number, Buffer>> = {
  0x74: Buffer.from('true'),
  0x66: Buffer.from('false'),
  0x6e: Buffer.from('null'),
};
/** The characters of the one-character escapes (`\n` and the rest), by the byte after the `\`. */
const escaped: Readonly<Record<number, number>> = {
  0x22: 0x22,
  0x5c: 0x5c,
  0x2f: 0x2f,
  0x62: 0x08,
  0x66: 0x0c,
  0x6e: 0x0a,
  0x72: 0x0d,
  0x74: 0x09,
};
const byteOrderMark = [0xef, 0xbb, 0xbf];

const isSpace = (byte: number): boolean => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
const isDigit = (byte: number): boolean => byte >= 0x30 && byte <= 0x39;
/** The value of a hex digit, or -1. */
const hexValue = (byte: number): number =>
  isDigit(byte)
    ? byte - 0x30
    : byte >= 0x61 && byte <= 0x66
      ? byte - 0x57
      : byte >= 0x41 && byte <= 0x46
        ? byte - 0x37
        : -1;

/** Reads the unit paths' values of one JSON document, pushed in chunks of any size. */
export class JsonUnitReader {
  private state = START;
  /**
   * The containers open now; `kinds[i]` is the kind of the one at depth i + 1. Plain arrays, not typed
   * ones: a typed array costs about a microsecond to make, more than reading a small answer.
   */
  private depth = 0;
  private readonly kinds: number[] = [];
  /** For each depth, the paths (one bit each) whose names so far lead to the object open there. */
  private readonly live: number[] = new Array<number>(mostNames + 2).fill(0);
  /** The paths whose value is the value being read, and those that go on into it (when it is an object). */
  private targets = 0;
  private descend = 0;
  /** The string being read is a key. */
  private inKey = false;
  /** Characters of the key kept so far; -1 when it can be no path's name. */
  private keyLength = -1;
  private readonly key: number[] = [];
  private unicodeLeft = 0;
  private unicode = 0;
  /** Bytes still to come of a character of several bytes, and the range of the next one (RFC 3629 §4). */
  private continuationLeft = 0;
  private lowest = 0;
  private highest = 0;
  private literal: Buffer = literals[0x6e]!;
  private literalAt = 0;
  private byteOrderMarkAt = 0;
  /** The characters of a number at a path; `numberLength` past the array's when it is longer. */
  private numberLength = 0;
  private readonly number: number[] = [];
  /** What each path has said so far. */
  private readonly values: PathValue[];

  constructor(private readonly paths: UnitPaths) {
    this.values = paths.names.map(() => undefined);
    this.live[1] = (1 << paths.names.length) - 1;
    // The document itself is no path's value: its keys are the first names.
    this.descend = this.live[1];
  }

  /** The entries of the reader's arrays: what it keeps of what it read, `mostHeld` at most. */
  get held(): number {
    return this.kinds.length + this.live.length + this.key.length + this.number.length;
  }

  /** Reads the next chunk of the document. It keeps no reference to it. */
  push(chunk: Uint8Array): void {
    const length = chunk.length;
    for (let at = 0; at < length; at += 1) {
      const byte = chunk[at]!;
      switch (this.state) {
        case STRING: {
          // Most of a document is in its strings: their plain bytes are passed over in one loop.
          let next = at;
          while (next < length) {
            const plain = chunk[next]!;
            if (plain === quote || plain === backslash || plain < 0x20 || plain >= 0x80) break;
            next += 1;
          }
          if (this.keyLength >= 0) this.keepKey(chunk, at, next);
          if (next === length) return;
          at = next;
          this.stringByte(chunk[at]!);
          break;
        }
        case AFTER_VALUE:
          this.afterValue(byte);
          break;
        case VALUE:
        case FIRST_ELEMENT:
          if (!isSpace(byte)) this.valueStart(byte);
          break;
        case FIRST_KEY:
        case KEY:
          if (isSpace(byte)) break;
          if (byte === quote) this.startString(true);
          else if (byte === 0x7d && this.state === FIRST_KEY) this.close(OBJECT);
          else this.state = MALFORMED;
          break;
        case COLON:
          if (isSpace(byte)) break;
          this.state = byte === 0x3a ? VALUE : MALFORMED;
          break;
        case ESCAPE:
          this.escape(byte);
          break;
        case UNICODE:
          this.unicodeDigit(byte);
          break;
        case CONTINUATION:
          this.continuation(byte);
          break;
        case LITERAL:
          this.literalByte(byte);
          break;
        case START:
          if (byte === byteOrderMark[0]) {
            this.state = BYTE_ORDER_MARK;
            this.byteOrderMarkAt = 1;
          } else {
            this.state = VALUE;
            at -= 1;
          }
          break;
        case BYTE_ORDER_MARK:
          if (byte !== byteOrderMark[this.byteOrderMarkAt]) this.state = MALFORMED;
          else if ((this.byteOrderMarkAt += 1) === byteOrderMark.length) this.state = VALUE;
          break;
        case MALFORMED:
          return;
        default:
          // Within a number: a byte that cannot go on with it ends it, and is read again after it.
          if (!this.numberByte(byte)) at -= 1;
      }
    }
  }

  /**
   * The document has ended: the units its paths say (as `unitsTotal` adds them), or null when it is not
   * one whole JSON value or no path said a whole number.
   */
  end(): number | null {
    const state = this.state;
    // A number at the top ends with the document.
    if (state === ZERO || state === INTEGER || state === FRACTION || state === EXPONENT) this.numberEnded();
    if (this.state !== AFTER_VALUE || this.depth !== 0) return null;
    return unitsTotal(this.values);
  }

  /**
   * The units the paths said in the document so far, which was cut before its end: the values read
   * whole (a number cut midway says nothing). Null when what came was not JSON, or no path said a whole
   * number.
   */
  saidSoFar(): number | null {
    return this.state === MALFORMED ? null : unitsTotal(this.values);
  }

  private valueStart(byte: number): void {
    if (byte === quote) return this.startString(false);
    if (byte === 0x7b) return this.open(OBJECT);
    if (byte === 0x5b) return this.open(ARRAY);
    if (byte === 0x5d && this.state === FIRST_ELEMENT) return this.close(ARRAY);
    if (byte === 0x2d || isDigit(byte)) {
      this.numberLength = 0;
      this.keepNumber(byte);
      this.state = byte === 0x2d ? MINUS : byte === 0x30 ? ZERO : INTEGER;
      return;
    }
    const literal = literals[byte];
    if (literal === undefined) {
      this.state = MALFORMED;
      return;
    }
    this.literal = literal;
    this.literalAt = 1;
    this.state = LITERAL;
  }

  private afterValue(byte: number): void {
    if (isSpace(byte)) return;
    const kind = this.depth === 0 ? 0 : this.kinds[this.depth - 1];
    if (byte === 0x2c && kind !== 0) this.state = kind === OBJECT ? KEY : VALUE;
    else if (byte === 0x7d && kind === OBJECT) this.close(OBJECT);
    else if (byte === 0x5d && kind === ARRAY) this.close(ARRAY);
    else this.state = MALFORMED;
  }

  private open(kind: number): void {
    if (this.depth === deepestJsonNesting) {
      this.state = MALFORMED;
      return;
    }
    // An object or an array is no whole number; an array has no names to go on with.
    this.said('wrong');
    this.kinds[this.depth] = kind;
    this.depth += 1;
    if (this.depth < this.live.length) this.live[this.depth] = kind === OBJECT ? this.descend : 0;
    this.descend = 0;
    this.state = kind === OBJECT ? FIRST_KEY : FIRST_ELEMENT;
  }

  private close(kind: number): void {
    if (this.depth === 0 || this.kinds[this.depth - 1] !== kind) {
      this.state = MALFORMED;
      return;
    }
    this.depth -= 1;
    this.state = AFTER_VALUE;
  }

  private startString(inKey: boolean): void {
    this.inKey = inKey;
    this.keyLength = inKey && this.depth < this.live.length && this.live[this.depth] !== 0 ? 0 : -1;
    this.state = STRING;
  }

  /** A byte of a string that is not plain: its end, an escape, a control character, or UTF-8. */
  private stringByte(byte: number): void {
    if (byte === quote) {
      if (this.inKey) this.keyEnded();
      else this.valueEnded('wrong');
      return;
    }
    if (byte === backslash) {
      this.state = ESCAPE;
      return;
    }
    // RFC 8259 §7: control characters must be escaped.
    if (byte < 0x20) {
      this.state = MALFORMED;
      return;
    }
    // Path names are ASCII: a key with any other character is none of them.
    this.keyLength = -1;
    this.continuationLeft = byte >= 0xf0 ? 3 : byte >= 0xe0 ? 2 : 1;
    this.lowest = byte === 0xe0 ? 0xa0 : byte === 0xf0 ? 0x90 : 0x80;
    this.highest = byte === 0xed ? 0x9f : byte === 0xf4 ? 0x8f : 0xbf;
    this.state = byte >= 0xc2 && byte <= 0xf4 ? CONTINUATION : MALFORMED;
  }

  private continuation(byte: number): void {
    if (byte < this.lowest || byte > this.highest) {
      this.state = MALFORMED;
      return;
    }
    this.lowest = 0x80;
    this.highest = 0xbf;
    if ((this.continuationLeft -= 1) === 0) this.state = STRING;
  }

  private escape(byte: number): void {
    if (byte === 0x75) {
      this.unicodeLeft = 4;
      this.unicode = 0;
      this.state = UNICODE;
      return;
    }
    const character = escaped[byte];
    if (character === undefined) {
      this.state = MALFORMED;
      return;
    }
    this.keepKeyCharacter(character);
    this.state = STRING;
  }

  private unicodeDigit(byte: number): void {
    const digit = hexValue(byte);
    if (digit === -1) {
      this.state = MALFORMED;
      return;
    }
    this.unicode = this.unicode * 16 + digit;
    if ((this.unicodeLeft -= 1) > 0) return;
    this.keepKeyCharacter(this.unicode);
    this.state = STRING;
  }

  private keepKey(chunk: Uint8Array, from: number, to: number): void {
    for (let at = from; at < to; at += 1) this.keepKeyCharacter(chunk[at]!);
  }

  private keepKeyCharacter(character: number): void {
    if (this.keyLength < 0) return;
    if (this.keyLength === longestName) this.keyLength = -1;
    else this.key[this.keyLength++] = character;
  }

  /**
   * A key has ended: the paths whose next name it is. Its value replaces what a key of the same name
   * said before in this object (JSON.parse keeps the last), so what they said is forgotten.
   */
  private keyEnded(): void {
    this.state = COLON;
    this.targets = 0;
    this.descend = 0;
    if (this.keyLength < 0) return;
    const candidates = this.live[this.depth]!;
    const { names } = this.paths;
    for (let path = 0; path < names.length; path += 1) {
      const bit = 1 << path;
      const name = names[path]![this.depth - 1];
      if ((candidates & bit) === 0 || name === undefined || !this.keyIs(name)) continue;
      this.values[path] = undefined;
      if (names[path]!.length === this.depth) this.targets |= bit;
      else this.descend |= bit;
    }
  }

  /** Whether the key kept is `name`, compared without making a string of it. */
  private keyIs(name: string): boolean {
    if (name.length !== this.keyLength) return false;
    for (let at = 0; at < name.length; at += 1) if (name.charCodeAt(at) !== this.key[at]) return false;
    return true;
  }

  private literalByte(byte: number): void {
    if (byte !== this.literal[this.literalAt]) {
      this.state = MALFORMED;
      return;
    }
    this.literalAt += 1;
    if (this.literalAt < this.literal.length) return;
    this.valueEnded(this.literal[0] === 0x6e ? null : 'wrong');
  }

  /** The next byte of a number; false when it cannot go on with it (the number has then ended). */
  private numberByte(byte: number): boolean {
    const state = this.state;
    let next = MALFORMED;
    if (isDigit(byte)) {
      if (state === MINUS) next = byte === 0x30 ? ZERO : INTEGER;
      else if (state === INTEGER || state === FRACTION || state === EXPONENT) next = state;
      else if (state === POINT) next = FRACTION;
      else if (state === EXPONENT_MARK || state === EXPONENT_SIGN) next = EXPONENT;
    } else if (byte === 0x2e) {
      if (state === ZERO || state === INTEGER) next = POINT;
    } else if (byte === 0x65 || byte === 0x45) {
      if (state === ZERO || state === INTEGER || state === FRACTION) next = EXPONENT_MARK;
    } else if (byte === 0x2b || byte === 0x2d) {
      if (state === EXPONENT_MARK) next = EXPONENT_SIGN;
    } else if (state === ZERO || state === INTEGER || state === FRACTION || state === EXPONENT) {
      this.numberEnded();
      return false;
    }
    this.state = next;
    this.keepNumber(byte);
    return true;
  }

  private keepNumber(byte: number): void {
    if (this.targets === 0) return;
    if (this.numberLength < longestNumber) this.number[this.numberLength] = byte;
    this.numberLength += 1;
  }

  private numberEnded(): void {
    if (this.targets === 0) return this.valueEnded(null);
    // The grammar checked is JSON's, whose numbers Number() reads as JSON.parse does.
    const value =
      this.numberLength > longestNumber
        ? Number.NaN
        : Number(String.fromCharCode(...this.number.slice(0, this.numberLength)));
    this.valueEnded(isUnits(value) ? value : 'wrong');
  }

  /** A value has ended: it is what the paths it is the value of say (null says nothing). */
  private valueEnded(value: number | 'wrong' | null): void {
    this.said(value);
    this.descend = 0;
    this.state = AFTER_VALUE;
  }

  private said(value: number | 'wrong' | null): void {
    const targets = this.targets;
    this.targets = 0;
    if (targets === 0) return;
    for (let path = 0; path < this.values.length; path += 1) {
      if ((targets & (1 << path)) !== 0) this.values[path] = value === null ? undefined : value;
    }
  }
}
