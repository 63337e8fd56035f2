import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Answers shaped as LLM APIs send them (test/fixtures/llm/): OpenAI's chat completion, as JSON and as a
 * stream with `stream_options.include_usage`, and Anthropic's Messages stream. Their texts hold
 * characters of 2, 3 and 4 bytes in UTF-8, so a split may fall inside one.
 */
export const llmAnswers = {
  /** `usage.total_tokens` 29 (19 prompt + 10 completion). */
  openaiJson: readLlmAnswer('openai-chat-completion.json'),
  /** `usage.total_tokens` 21 in the last chunk (`choices: []`), `"usage":null` before, then `[DONE]`. */
  openaiStream: readLlmAnswer('openai-chat-stream.txt'),
  /** `message.usage.input_tokens` 25 in message_start, `usage.output_tokens` 15 in message_delta. */
  anthropicStream: readLlmAnswer('anthropic-messages-stream.txt'),
};

function readLlmAnswer(name: string): Buffer {
  return readFileSync(path.resolve('test/fixtures/llm', name));
}

/** The stream `text` (written with LF) with its lines ended by `ending` instead. */
export const withLineEnds = (text: Buffer, ending: '\r\n' | '\r' | '\n'): Buffer =>
  Buffer.from(text.toString('utf8').replaceAll('\n', ending));

/**
 * Every way the tests cut `bytes` into chunks, each named: in two at every offset (an empty chunk at
 * either end included), and a byte at a time.
 */
export function chunkings(bytes: Buffer): Array<[string, Buffer[]]> {
  const ways: Array<[string, Buffer[]]> = [];
  for (let at = 0; at <= bytes.length; at += 1) {
    ways.push([`split at ${at}`, [bytes.subarray(0, at), bytes.subarray(at)]]);
  }
  ways.push(['a byte at a time', [...bytes].map((byte) => Buffer.from([byte]))]);
  return ways;
}
