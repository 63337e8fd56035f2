import { describe, expect, it } from 'vitest';
import { EventStreamParser } from '../../src/kit/event-stream.js';
import { chunkings, llmAnswers, withLineEnds } from '../helpers/llm-answers.js';

/** The data of each event the parser dispatches from `chunks`, decoded. */
function eventsOf(chunks: readonly (Buffer | string)[], maxEventBytes = 65_536): string[] {
  const events: string[] = [];
  const parser = new EventStreamParser((data) => events.push(data.toString('utf8')), maxEventBytes);
  for (const chunk of chunks) parser.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return events;
}

describe('EventStreamParser', () => {
  it('joins the data lines of an event with LF, and dispatches it at the empty line', () => {
    expect(eventsOf(['data: a\ndata: b\n\ndata: c\n\n'])).toEqual(['a\nb', 'c']);
  });

  it('drops one space after the colon, no more, and reads data: without one', () => {
    expect(eventsOf(['data:x\n\ndata:  y\n\ndata: \n\n'])).toEqual(['x', ' y', '']);
  });

  it('reads a bare data line as an empty value', () => {
    expect(eventsOf(['data\ndata\n\n', 'data\n\n'])).toEqual(['\n', '']);
  });

  it('passes over comments, the other fields and fields that only start like data', () => {
    const stream = ': ping\nevent: message_delta\nid: 7\nretry: 10\ndatax: no\nData: no\ndata: yes\n\n';
    expect(eventsOf([stream])).toEqual(['yes']);
  });

  it('dispatches no event that has no data', () => {
    expect(eventsOf(['event: ping\n\n: comment\n\n\n\n'])).toEqual([]);
  });

  it.each([
    ['CRLF', 'data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n'],
    ['CR', 'data: a\rdata: b\r\rdata: c\r\r'],
    ['mixed', 'data: a\r\ndata: b\n\rdata: c\r\r\n'],
  ])('ends lines at %s as at LF', (_ending, stream) => {
    expect(eventsOf([stream])).toEqual(['a\nb', 'c']);
  });

  it('ends one line at a CR and the LF that starts the next chunk, two at a CR and a CR', () => {
    expect(eventsOf(['data: a\r', '\ndata: b\r', '\n\r', '\ndata: c\r', '\r'])).toEqual(['a\nb', 'c']);
  });

  it('drops one byte order mark at the start of the stream, even a byte at a time, and no second one', () => {
    const bom = '\uFEFF';
    expect(eventsOf([`${bom}data: a\n\n`])).toEqual(['a']);
    expect(eventsOf([...Buffer.from(`${bom}data: a\n\n`)].map((byte) => Buffer.from([byte])))).toEqual(['a']);
    expect(eventsOf([`${bom}${bom}data: a\n\ndata: b\n\n`])).toEqual(['b']);
    expect(eventsOf([`data: ${bom}a\n\n`])).toEqual([`${bom}a`]);
  });

  it('does not dispatch the event the stream ends inside', () => {
    expect(eventsOf(['data: a\n\ndata: b\n'])).toEqual(['a']);
    expect(eventsOf(['data: a\n\ndata: b'])).toEqual(['a']);
  });

  it('skips an event with more data than the bound, and reads the next one', () => {
    expect(eventsOf(['data: 12345678\n\n'], 8)).toEqual(['12345678']);
    expect(eventsOf(['data: 123456789\n\ndata: ok\n\n'], 8)).toEqual(['ok']);
    expect(eventsOf(['data: 1234\ndata: 5678\ndata: 9\n\ndata: ok\n\n'], 8)).toEqual(['ok']);
    expect(eventsOf(['data: 1234\ndata: 567\n\n'], 8)).toEqual(['1234\n567']);
  });

  it('skips a line far past the bound that comes in many chunks, and reads the next event', () => {
    const long = 'x'.repeat(1_000);
    const chunks = ['data: ', ...Array.from({ length: 100 }, () => long), '\n\ndata: ok\n\n'];
    expect(eventsOf(chunks, 64)).toEqual(['ok']);
    expect(eventsOf([`: ${long}\nevent: ${long}\ndata: ok\n\n`], 64)).toEqual(['ok']);
  });

  it('holds copies, not slices, of the lines it keeps past their chunk: a chunk reused later changes nothing', () => {
    const events: string[] = [];
    const parser = new EventStreamParser((data) => events.push(data.toString('utf8')), 64);
    const chunks = [Buffer.from('data: a\ndata: b'), Buffer.from('c\ndata: d\n'), Buffer.from('\n')];
    for (const chunk of chunks) {
      parser.push(chunk);
      chunk.fill('x');
    }
    expect(events).toEqual(['a\nbc\nd']);
  });

  it('decodes a character its chunks split', () => {
    const bytes = Buffer.from('data: 你好 👋\n\n');
    expect(eventsOf([bytes.subarray(0, 8), bytes.subarray(8, 15), bytes.subarray(15)])).toEqual(['你好 👋']);
  });

  describe.each([
    ['LF', llmAnswers.anthropicStream, 8],
    ['CRLF', withLineEnds(llmAnswers.anthropicStream, '\r\n'), 8],
    ['CR', withLineEnds(llmAnswers.anthropicStream, '\r'), 8],
    ['a byte order mark and LF', Buffer.concat([Buffer.from('\uFEFF'), llmAnswers.openaiStream]), 6],
  ])('a recorded stream with %s', (_name, stream, count) => {
    const whole = eventsOf([stream]);

    it('gives its events whole: JSON, and the [DONE] of OpenAI', () => {
      expect(whole).toHaveLength(count);
      const parsed = whole.filter((data) => data !== '[DONE]').map((data) => JSON.parse(data) as unknown);
      expect(parsed).toHaveLength(whole[count - 1] === '[DONE]' ? count - 1 : count);
    });

    it('gives the same events however its chunks cut it', () => {
      const different = chunkings(stream)
        .filter(([, chunks]) => JSON.stringify(eventsOf(chunks)) !== JSON.stringify(whole))
        .map(([way]) => way);
      expect(different).toEqual([]);
    });
  });
});
