import http from 'node:http';
import type { AddressInfo } from 'node:net';

// The streamed rows' upstream: every request is answered as OpenAI's /v1/chat/completions answers one
// with `stream: true` and `stream_options.include_usage`: `events` chunks of a chat completion, each with
// a content delta of one token or so, then the usage chunk (`choices: []`) and `data: [DONE]`. It sends
// as fast as it can, but one event per write and per turn of the event loop, as a model's server sends
// tokens: the gateway reads a few events at a time, not the whole answer at once. Its usage says
// `prompt` tokens in and one token out per content delta.
const [port = '0', eventsArgument = '100', promptArgument = '37'] = process.argv.slice(2);
const events = Number(eventsArgument);
const promptTokens = Number(promptArgument);
const id = 'chatcmpl-BXcJ2o1PoRC5mVGHRCK8DzQzsVSkS';
const head = `{"id":"${id}","object":"chat.completion.chunk","created":1747390008,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_54eb4bd693","choices":`;
// Words of a plausible answer, cut as a tokenizer cuts them (a leading space, about four characters).
const tokens = (
  'Rate limiting an LLM API by tokens means reading what each answer cost from the usage the model ' +
  'reports, then charging the caller for it; a gateway that counts requests alone lets one long ' +
  'completion cost as much as a short one, which is rarely what the owner of the API wants.'
)
  .split(/(?= )/)
  .map((token) => JSON.stringify(token));
const delta = (content: string) =>
  `data: ${head}[{"index":0,"delta":{"content":${content}},"logprobs":null,"finish_reason":null}],"usage":null}\n\n`;
const first = `data: ${head}[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}\n\n`;
const stop = `data: ${head}[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}\n\n`;
const completionTokens = Math.max(0, events - 4);
const usage = `data: ${head}[],"usage":{"prompt_tokens":${promptTokens},"completion_tokens":${completionTokens},"total_tokens":${promptTokens + completionTokens},"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}\n\n`;
/** One answer's `events` events: the role, `events - 4` content deltas, the stop, the usage, [DONE]. */
const answer = [
  first,
  ...Array.from({ length: completionTokens }, (_, i) => delta(tokens[i % tokens.length]!)),
  stop,
  usage,
  'data: [DONE]\n\n',
].map((event) => Buffer.from(event));

const server = http.createServer((req, res) => {
  req.resume();
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-request-id': id,
  });
  let next = 0;
  const send = () => {
    if (res.destroyed) return;
    if (next === answer.length) {
      res.end();
      return;
    }
    res.write(answer[next]!);
    next += 1;
    setImmediate(send);
  };
  send();
});
server.keepAliveTimeout = 60_000;
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
