import type { IncomingMessage, ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import { llmAnswers } from './llm-answers.js';
import { startUpstream, type SeenRequest, type TestUpstream } from './upstream.js';

/**
 * An upstream that answers as LLM APIs do, with the recorded answers of `llmAnswers`:
 * `POST /v1/chat/completions` as OpenAI's (a JSON answer, or with `"stream": true` an event stream whose
 * last chunk says the usage when `stream_options.include_usage` asks for it), `POST /v1/messages` as
 * Anthropic's Messages stream (`message_start` … `message_stop`). The request header `x-answer` asks for
 * another answer: `malformed` (JSON cut short), `gzip` (the JSON compressed), `negotiated` (the JSON,
 * compressed when the request's Accept-Encoding takes gzip, as a server that negotiates its coding does),
 * `large` (a JSON answer of 5 MB), `with-header` (the JSON, and `X-Tokens: 3`), `with-trailer` (the JSON
 * chunked, and `X-Tokens: 3` in a trailer); `x-status` the status of a JSON answer, `x-content-type` its
 * Content-Type.
 */
export const openAiJson = llmAnswers.openaiJson;
/** Each event of a recorded stream, its blank line included: a stream is sent an event at a time. */
const eventsOf = (stream: Buffer) =>
  stream
    .toString('utf8')
    .split(/\n\n/)
    .filter((event) => event.trim() !== '')
    .map((event) => Buffer.from(`${event}\n\n`));
export const openAiEvents = eventsOf(llmAnswers.openaiStream);
export const anthropicEvents = eventsOf(llmAnswers.anthropicStream);
/** OpenAI's stream as it is sent without `include_usage`: no chunk says the usage. */
export const openAiEventsWithoutUsage = openAiEvents.filter((event) => !event.includes('"usage":{'));

/** What the fixtures say they cost. */
export const openAiJsonTokens = 29;
export const openAiStreamTokens = 21;
/** `message_start`'s input tokens and the last `message_delta`'s output tokens. */
export const anthropicTokens = 25 + 15;

/** A JSON answer of 5 MB whose usage comes last, after the 1 MiB a reader that held the answer could keep. */
export const largeAnswer = Buffer.from(
  JSON.stringify({
    choices: [
      { message: { content: Array.from({ length: 480_000 }, (_, i) => i.toString(36).padStart(8, '~')) } },
    ],
    usage: { total_tokens: 1 },
  }),
);

export interface LlmUpstreamOptions {
  /** Awaited before each event of a stream is written: a test paces the stream with it. */
  beforeEvent?: (index: number) => Promise<void> | void;
}

export async function startLlmUpstream(options: LlmUpstreamOptions = {}): Promise<TestUpstream> {
  return startUpstream((req: IncomingMessage, res: ServerResponse, seen: SeenRequest) => {
    const type = req.headers['x-content-type']?.toString();
    if (req.url === '/v1/messages') return void stream(res, anthropicEvents, options, type);
    const asked = JSON.parse(seen.body || '{}') as {
      stream?: boolean;
      stream_options?: { include_usage?: boolean };
    };
    if (asked.stream === true)
      return void stream(
        res,
        asked.stream_options?.include_usage === true ? openAiEvents : openAiEventsWithoutUsage,
        options,
        type,
      );
    const variant = req.headers['x-answer'];
    const json = { 'content-type': type ?? 'application/json' };
    const status = Number(req.headers['x-status'] ?? 200);
    if (status !== 200) return res.writeHead(status, json).end(openAiJson);
    if (variant === 'malformed') return res.writeHead(200, json).end(openAiJson.subarray(0, -20));
    if (variant === 'gzip')
      return res.writeHead(200, { ...json, 'content-encoding': 'gzip' }).end(gzipSync(openAiJson));
    if (variant === 'negotiated' && /\bgzip\b/.test(req.headers['accept-encoding'] ?? ''))
      return res.writeHead(200, { ...json, 'content-encoding': 'gzip' }).end(gzipSync(openAiJson));
    if (variant === 'with-trailer') {
      res.writeHead(200, { ...json, trailer: 'X-Tokens' }).write(openAiJson);
      res.addTrailers({ 'X-Tokens': '3' });
      return void res.end();
    }
    if (variant === 'large') return res.writeHead(200, json).end(largeAnswer);
    if (variant === 'with-header') return res.writeHead(200, { ...json, 'x-tokens': '3' }).end(openAiJson);
    res.writeHead(200, json).end(openAiJson);
  });
}

async function stream(
  res: ServerResponse,
  events: readonly Buffer[],
  options: LlmUpstreamOptions,
  type = 'text/event-stream',
) {
  res.writeHead(200, { 'content-type': type, 'cache-control': 'no-cache' });
  for (const [index, event] of events.entries()) {
    await options.beforeEvent?.(index);
    if (res.destroyed) return;
    res.write(event);
  }
  res.end();
}
