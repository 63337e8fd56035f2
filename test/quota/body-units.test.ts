import { describe, expect, it } from 'vitest';
import { bodyUnitsReader, type AnswerHead, type BodyBounds } from '../../src/quota/body-units.js';
import { parseUnitPaths } from '../../src/quota/unit-paths.js';
import { chunkings, llmAnswers, withLineEnds } from '../helpers/llm-answers.js';

const openai = parseUnitPaths('usage.total_tokens');
const anthropic = parseUnitPaths(['message.usage.input_tokens', 'usage.output_tokens']);
const json: AnswerHead = { contentType: 'application/json', contentEncoding: undefined };
const eventStream: AnswerHead = {
  contentType: 'text/event-stream; charset=utf-8',
  contentEncoding: undefined,
};

/** The units the reader says for an answer that came in `chunks`. */
function unitsOf(
  paths: typeof openai,
  head: AnswerHead,
  chunks: readonly (Buffer | string)[],
  bounds?: BodyBounds,
): number | null {
  const reader = bodyUnitsReader(paths, head, bounds);
  if (reader === null) throw new Error(`no reader for ${JSON.stringify(head)}`);
  for (const chunk of chunks) reader.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return reader.end();
}

const bom = Buffer.from('\uFEFF');
const recorded: Array<[string, typeof openai, AnswerHead, Buffer, number]> = [
  ['an OpenAI chat completion', openai, json, llmAnswers.openaiJson, 29],
  [
    'an OpenAI chat completion with a byte order mark',
    openai,
    json,
    Buffer.concat([bom, llmAnswers.openaiJson]),
    29,
  ],
  ['an OpenAI stream with include_usage', openai, eventStream, llmAnswers.openaiStream, 21],
  ['an OpenAI stream with CRLF', openai, eventStream, withLineEnds(llmAnswers.openaiStream, '\r\n'), 21],
  ['an Anthropic Messages stream', anthropic, eventStream, llmAnswers.anthropicStream, 40],
  ['an Anthropic stream with CR', anthropic, eventStream, withLineEnds(llmAnswers.anthropicStream, '\r'), 40],
  [
    'an Anthropic stream with a byte order mark',
    anthropic,
    eventStream,
    Buffer.concat([bom, llmAnswers.anthropicStream]),
    40,
  ],
];

describe('bodyUnitsReader on recorded answers', () => {
  it.each(recorded)('reads %s', (_name, paths, head, answer, units) => {
    expect(unitsOf(paths, head, [answer])).toBe(units);
  });

  it.each(recorded)('reads %s the same however its chunks cut it', (_name, paths, head, answer, units) => {
    const different = chunkings(answer)
      .filter(([, chunks]) => unitsOf(paths, head, chunks) !== units)
      .map(([way]) => way);
    expect(different).toEqual([]);
  });

  it('adds the paths of a JSON answer, and reads one path of a stream alone', () => {
    expect(
      unitsOf(parseUnitPaths(['usage.prompt_tokens', 'usage.completion_tokens']), json, [
        llmAnswers.openaiJson,
      ]),
    ).toBe(29);
    expect(unitsOf(parseUnitPaths('usage.output_tokens'), eventStream, [llmAnswers.anthropicStream])).toBe(
      15,
    );
  });
});

describe('bodyUnitsReader on the head of the answer', () => {
  it.each([
    'application/json',
    'Application/JSON; charset=UTF-8',
    'application/problem+json',
    'application/vnd.api+json ; x=1',
    'text/event-stream',
    'TEXT/EVENT-STREAM;charset=utf-8',
  ])('reads a body of type %s', (contentType) => {
    expect(bodyUnitsReader(openai, { contentType, contentEncoding: undefined })).not.toBeNull();
  });

  it.each([
    undefined,
    '',
    'text/plain',
    'text/json',
    'application/x-ndjson',
    'application/jsonl',
    'text/html+json/x',
  ])('cannot read a body of type %j', (contentType) => {
    expect(bodyUnitsReader(openai, { contentType, contentEncoding: undefined })).toBeNull();
  });

  it.each(['gzip', 'br', 'deflate', 'zstd', 'gzip, identity'])(
    'cannot read a body coded %s',
    (contentEncoding) => {
      expect(bodyUnitsReader(openai, { ...eventStream, contentEncoding })).toBeNull();
      expect(bodyUnitsReader(openai, { ...json, contentEncoding })).toBeNull();
    },
  );

  it.each(['', 'identity', ' IDENTITY '])('reads a body coded %j, which is no coding', (contentEncoding) => {
    expect(unitsOf(openai, { ...json, contentEncoding }, [llmAnswers.openaiJson])).toBe(29);
  });
});

describe('bodyUnitsReader on a JSON answer', () => {
  const answer = (total: string) => `{"usage":{"total_tokens":${total}}}`;

  it.each([
    ['empty', ''],
    ['cut short', llmAnswers.openaiJson.subarray(0, -3)],
    ['followed by more', `${answer('29')} {}`],
    [
      'not UTF-8',
      Buffer.concat([
        Buffer.from('{"x":"'),
        Buffer.from([0xff]),
        Buffer.from(`","usage":{"total_tokens":29}}`),
      ]),
    ],
    ['without usage', '{"error":{"message":"overloaded"}}'],
    ['an array', '[{"usage":{"total_tokens":29}}]'],
    ['a fraction', answer('29.5')],
    ['a string', answer('"29"')],
    ['a negative', answer('-29')],
    ['past 999999999999999', answer('1000000000000000')],
  ])('is unreadable when it is %s', (_name, body) => {
    expect(unitsOf(openai, json, [body])).toBeNull();
  });

  it('reads an answer past 1 MiB, its usage first or last (the bound of the buffer it no longer keeps)', () => {
    const padding = `"pad":"${'x'.repeat(1_048_576)}"`;
    expect(unitsOf(openai, json, [`{${padding},"usage":{"total_tokens":29}}`])).toBe(29);
    expect(unitsOf(openai, json, [`{"usage":{"total_tokens":29},${padding}}`])).toBe(29);
  });
});

describe('bodyUnitsReader on an event stream', () => {
  const usage = (total: unknown) =>
    `data: ${JSON.stringify({ choices: [], usage: { total_tokens: total } })}\n\n`;

  it('skips [DONE], data that is not JSON and malformed JSON, and reads the events after them', () => {
    const stream = [
      'data: [DONE]\n\n',
      'data: usage: 5\n\n',
      'data: {"usage":{"total_tokens":\n\n',
      usage(21),
      'data: {"usage":\n\n',
    ];
    expect(unitsOf(openai, eventStream, stream)).toBe(21);
  });

  it('reads JSON split over data lines', () => {
    expect(unitsOf(openai, eventStream, ['data: {"usage":\ndata: {"total_tokens"\r\ndata: :21}}\n\n'])).toBe(
      21,
    );
  });

  it('skips an event past its bound, and reads a later one', () => {
    const big = `data: {"pad":"${'x'.repeat(100)}","usage":{"total_tokens":99}}\n\n`;
    const bounds = { eventBytes: 100 };
    expect(unitsOf(openai, eventStream, [big], bounds)).toBeNull();
    expect(unitsOf(openai, eventStream, [usage(21), big], bounds)).toBe(21);
    expect(unitsOf(openai, eventStream, [big, usage(21)], bounds)).toBe(21);
  });

  it('skips an event past 64 KiB by default', () => {
    const big = `data: {"pad":"${'x'.repeat(65_536)}","usage":{"total_tokens":99}}\n\n`;
    expect(unitsOf(openai, eventStream, [usage(21), big])).toBe(21);
  });

  it('takes the last value of each path: the last message_delta of Anthropic', () => {
    const stream = llmAnswers.anthropicStream
      .toString()
      .replace('"usage":{"output_tokens":15}', '"usage":{"output_tokens":7}')
      .replace(
        'event: message_stop',
        'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":30}}\n\nevent: message_stop',
      );
    expect(unitsOf(anthropic, eventStream, [stream])).toBe(55);
  });

  it('is unreadable when a path last said a value that is no whole number', () => {
    for (const value of [21.5, '21', -1, 1e15]) {
      expect(unitsOf(openai, eventStream, [usage(21), usage(value)])).toBeNull();
    }
    expect(unitsOf(openai, eventStream, [usage('21'), usage(21)])).toBe(21);
  });

  it('charges what was said when one path never says: an Anthropic stream that ends after message_start', () => {
    const start = llmAnswers.anthropicStream.toString().split('\n\n')[0]!;
    expect(unitsOf(anthropic, eventStream, [`${start}\n\n`])).toBe(25);
  });

  it('is unreadable when the stream says nothing, or ends inside the event that says it', () => {
    expect(unitsOf(openai, eventStream, [])).toBeNull();
    expect(unitsOf(openai, eventStream, [': nothing\n\ndata: [DONE]\n\n'])).toBeNull();
    const stream = llmAnswers.openaiStream.toString();
    expect(unitsOf(openai, eventStream, [stream.slice(0, stream.indexOf('\n\ndata: [DONE]'))])).toBeNull();
  });
});

describe('a BodyUnitsReader', () => {
  it('never throws, and a chunk that is not bytes makes the answer unreadable', () => {
    for (const head of [json, eventStream]) {
      const reader = bodyUnitsReader(openai, head)!;
      reader.push(
        Buffer.from(
          head === json ? '{"usage":{"total_tokens":21}}' : 'data: {"usage":{"total_tokens":21}}\n\n',
        ),
      );
      expect(() => reader.push(null as unknown as Buffer)).not.toThrow();
      expect(reader.end()).toBeNull();
    }
  });

  it('says its units once, and sees nothing after its end', () => {
    const reader = bodyUnitsReader(openai, eventStream)!;
    reader.push(Buffer.from('data: {"usage":{"total_tokens":21}}\n\n'));
    expect(reader.end()).toBe(21);
    reader.push(Buffer.from('data: {"usage":{"total_tokens":22}}\n\n'));
    expect(reader.end()).toBeNull();
  });
});
