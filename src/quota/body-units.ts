/**
 * What an upstream's answer body says the exchange cost, read as the body streams past to the client:
 * a `throttleunits` restriction's `body` paths. LLM APIs say their token counts there: OpenAI and the
 * servers that answer as it does put `usage` in a JSON answer, and in the last chunk of a stream with
 * `stream_options.include_usage`; Anthropic's Messages stream says the input tokens in `message_start`
 * and the output tokens, running, in each `message_delta`.
 *
 * Pure: bytes in, a number out. It never holds a byte back (it sees copies of what goes to the client)
 * and bounds what it keeps.
 */
import { TextDecoder } from 'node:util';
import { EventStreamParser } from '../kit/event-stream.js';
import { JsonUnitReader } from './json-unit-reader.js';
import { mayHoldUnits, UnitTally, type UnitPaths } from './unit-paths.js';

/** How much of an answer is looked into. */
export interface BodyBounds {
  /** An event of a stream with more data than this is skipped (a later one may still say the units). */
  eventBytes: number;
}
export const defaultBodyBounds: Readonly<BodyBounds> = Object.freeze({
  eventBytes: 65_536,
});

/** The response fields that say how to read the body, as Node gives them. */
export interface AnswerHead {
  contentType: string | undefined;
  contentEncoding: string | undefined;
}

export interface BodyUnitsReader {
  /**
   * Sees the next chunk of the answer as it goes to the client, and keeps none of it (a JSON answer is
   * read as it streams, whatever its size). Never throws: a fault makes the answer unreadable instead.
   */
  push(chunk: Buffer): void;
  /**
   * The answer ended whole: the units it says, the sum of the paths' last values (those of the paths
   * that said one); or null when it is unreadable: no path said a value, a path's last value is not a
   * whole number from 0 to 999999999999999, a JSON answer is malformed or nested past its bound. Call
   * it once (or `saidSoFar`).
   */
  end(): number | null;
  /**
   * The answer was cut before its end: the units it said in what came, read as `end` reads them (a JSON
   * answer's values read whole, a stream's events read whole); null when it said none, or what came was
   * not JSON. Call it once (or `end`).
   */
  saidSoFar(): number | null;
}

/**
 * A reader of the units `paths` say in an answer with this head, or null when its body cannot say them:
 * the media type is neither JSON (`application/json`, `…/…+json`) nor `text/event-stream`, or the body
 * has a content coding (gzip and the rest are not decoded; `identity` is none).
 */
export function bodyUnitsReader(
  paths: UnitPaths,
  head: AnswerHead,
  bounds: Readonly<BodyBounds> = defaultBodyBounds,
): BodyUnitsReader | null {
  const coding = head.contentEncoding?.trim().toLowerCase();
  if (coding !== undefined && coding !== '' && coding !== 'identity') return null;
  const type = mediaType(head.contentType);
  if (type === 'text/event-stream') return guarded(eventStreamUnits(paths, bounds.eventBytes));
  if (type === 'application/json' || /^[^/]+\/[^/]+\+json$/.test(type))
    return guarded(new JsonUnitReader(paths));
  return null;
}

/** `type/subtype` of a Content-Type, in lower case, without parameters; '' when absent. */
const mediaType = (contentType: string | undefined): string =>
  (contentType ?? '').split(';', 1)[0]!.trim().toLowerCase();

/** A stream of events: each event's data read as JSON as it ends, when it may hold units. */
function eventStreamUnits(paths: UnitPaths, maxEventBytes: number): BodyUnitsReader {
  const tally = new UnitTally(paths);
  const parser = new EventStreamParser((data) => {
    if (!mayHoldUnits(paths, data)) return;
    const json = parsedJson(data);
    if (json !== undefined) tally.read(json);
  }, maxEventBytes);
  // An event cut midway was never handed on: what the stream said is in the events read whole.
  return { push: (chunk) => parser.push(chunk), end: () => tally.total(), saidSoFar: () => tally.total() };
}

/**
 * An event's data is decoded as the SSE standard says: bad bytes replaced, and a byte order mark kept
 * (the stream's own was dropped before).
 */
const lenientUtf8 = new TextDecoder('utf-8', { ignoreBOM: true });

/** The value of the JSON in `bytes`, or undefined when they are not JSON (`[DONE]` among them). */
function parsedJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(lenientUtf8.decode(bytes)) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * `reader` as the proxy may call it: a fault (a chunk that is not bytes, a defect here) makes the answer
 * unreadable, and is never thrown into the stream that carries the answer to the client.
 */
function guarded(reader: BodyUnitsReader): BodyUnitsReader {
  let faulty = false;
  let ended = false;
  return {
    push(chunk) {
      if (faulty || ended) return;
      try {
        reader.push(chunk);
      } catch {
        faulty = true;
      }
    },
    end() {
      if (faulty || ended) return null;
      ended = true;
      return reader.end();
    },
    saidSoFar() {
      if (faulty || ended) return null;
      ended = true;
      return reader.saidSoFar();
    },
  };
}
