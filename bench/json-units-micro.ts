/**
 * The CPU the JSON answer reader costs per MiB, alone (no proxy, no sockets): OpenAI-shaped answers of
 * 5 MiB (`n` choices with logprobs), the usage last, in the chunks a socket hands on; beside it, what
 * the reader it replaced spent on an answer it could hold (gathered, decoded, JSON.parse); and both on
 * a recorded answer of a usual size. Run it apart
 * from the bench: `npx tsc -p tsconfig.bench.json && node dist/bench/json-units-micro.js`.
 */
import { readFileSync } from 'node:fs';
import { TextDecoder } from 'node:util';
import { bodyUnitsReader } from '../src/quota/body-units.js';
import { parseUnitPaths, UnitTally } from '../src/quota/unit-paths.js';

const mib = 1_048_576;
const paths = parseUnitPaths('usage.total_tokens');
const json = { contentType: 'application/json', contentEncoding: undefined };

/** An answer of about 5 MiB whose choices' text is `content`, the usage last. */
function answer(content: string): Buffer {
  const choice = {
    index: 0,
    message: { role: 'assistant', content },
    logprobs: {
      content: Array.from({ length: 8 }, (_, i) => ({
        token: ` t${i}`,
        logprob: -0.015625 * i,
        bytes: [32, 116, 48 + i],
        top_logprobs: [{ token: ' x', logprob: -4.5, bytes: [32, 120] }],
      })),
    },
    finish_reason: 'stop',
  };
  const count = Math.ceil((5 * mib) / JSON.stringify(choice).length);
  const choices = Array.from({ length: count }, (_, index) => ({ ...choice, index }));
  return Buffer.from(
    JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion', choices, usage: { total_tokens: 31 } }),
  );
}

function sliced(bytes: Buffer, size: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
  return chunks;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The streaming reader over `chunks`. */
const streamed = (chunks: readonly Buffer[]) => {
  const reader = bodyUnitsReader(paths, json)!;
  for (const chunk of chunks) reader.push(chunk);
  return reader.end();
};

/** What the reader before it did at the end of an answer it held: gather, decode, parse, walk. */
const parsedWhole = (chunks: readonly Buffer[]) => {
  const tally = new UnitTally(paths);
  tally.read(JSON.parse(strictUtf8.decode(Buffer.concat(chunks))));
  return tally.total();
};

/** CPU ms per MiB (user + system) over `rounds` reads, after a warm-up: the least of 7 tries. */
function cost(read: (chunks: readonly Buffer[]) => number | null, chunks: readonly Buffer[], rounds: number) {
  const bytes = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
  let units: number | null = null;
  for (let round = 0; round < 2; round += 1) units = read(chunks);
  let least = Infinity;
  for (let tries = 0; tries < 7; tries += 1) {
    const before = process.cpuUsage();
    for (let round = 0; round < rounds; round += 1) units = read(chunks);
    const spent = process.cpuUsage(before);
    least = Math.min(least, spent.user + spent.system);
  }
  return { msPerMib: least / 1000 / rounds / (bytes / mib), units };
}

const ascii = answer('The quick brown fox jumps over the lazy dog. '.repeat(6));
const mixed = answer('Größe: 5 €, 東京 😀, "quoted" \\ {braces} '.repeat(6));
const cases: Array<[string, Buffer, number]> = [
  ['ASCII text, 64 KiB chunks', ascii, 65_536],
  ['ASCII text, 16 KiB chunks', ascii, 16_384],
  ['ASCII text, 1 KiB chunks', ascii, 1_024],
  ['UTF-8 text and escapes, 64 KiB chunks', mixed, 65_536],
];
// A recorded answer of a usual size: the cost per answer, where the reader it replaced parsed it whole.
const recorded = [readFileSync('test/fixtures/llm/openai-chat-completion.json')];
const small = { reader: cost(streamed, recorded, 20_000), whole: cost(parsedWhole, recorded, 20_000) };
const perAnswer = (msPerMib: number) => ((msPerMib * recorded[0]!.length) / mib) * 1000;
console.log(
  `A recorded chat completion (${recorded[0]!.length} bytes): streaming reader ${perAnswer(small.reader.msPerMib).toFixed(2)} µs CPU an answer (units ${small.reader.units}); gathered and JSON.parse ${perAnswer(small.whole.msPerMib).toFixed(2)} µs (units ${small.whole.units})`,
);
for (const [name, bytes, size] of cases) {
  const chunks = sliced(bytes, size);
  const reader = cost(streamed, chunks, 5);
  const whole = cost(parsedWhole, chunks, 5);
  console.log(
    `${name} (${(bytes.length / mib).toFixed(2)} MiB): streaming reader ${reader.msPerMib.toFixed(2)} ms CPU per MiB (units ${reader.units}); gathered and JSON.parse ${whole.msPerMib.toFixed(2)} ms per MiB (units ${whole.units})`,
  );
}
