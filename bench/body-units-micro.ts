/**
 * The CPU a body units reader costs per event of a stream, alone (no proxy, no sockets): recorded-shape
 * OpenAI and Anthropic chunks, one event per chunk as the upstreams send them. Run it apart from the
 * bench: `npx tsc -p tsconfig.bench.json && node dist/bench/body-units-micro.js`.
 */
import { readFileSync } from 'node:fs';
import { bodyUnitsReader } from '../src/quota/body-units.js';
import { parseUnitPaths, type UnitPaths } from '../src/quota/unit-paths.js';

const fixture = (name: string) => readFileSync(`test/fixtures/llm/${name}`, 'utf8');
/** The events of a recorded stream, each with its blank line, and its last usage event. */
const eventsOf = (text: string) => text.split(/(?<=\n\n)/);

/** A stream of `count` text events in the shape of `stream`'s middle one, then its own end. */
function longStream(stream: string, middle: number, count: number): Buffer[] {
  const events = eventsOf(stream);
  const text = Buffer.from(events[middle]!);
  return [
    ...events.slice(0, middle).map((event) => Buffer.from(event)),
    ...Array.from({ length: count }, () => text),
    ...events.slice(middle + 1).map((event) => Buffer.from(event)),
  ];
}

const eventStream = { contentType: 'text/event-stream', contentEncoding: undefined };

/** CPU µs per event (user + system) over `rounds` streams, after a warm-up: the least of 7 tries. */
function cost(
  paths: UnitPaths,
  chunks: readonly Buffer[],
  rounds: number,
): { perEvent: number; units: number | null } {
  let units: number | null = null;
  const run = () => {
    const reader = bodyUnitsReader(paths, eventStream)!;
    for (const chunk of chunks) reader.push(chunk);
    units = reader.end();
  };
  for (let round = 0; round < rounds / 5; round += 1) run();
  let least = Infinity;
  for (let tries = 0; tries < 7; tries += 1) {
    const before = process.cpuUsage();
    for (let round = 0; round < rounds; round += 1) run();
    const spent = process.cpuUsage(before);
    least = Math.min(least, spent.user + spent.system);
  }
  return { perEvent: least / (rounds * chunks.length), units };
}

const openai = longStream(fixture('openai-chat-stream.txt'), 1, 500);
const anthropic = longStream(fixture('anthropic-messages-stream.txt'), 3, 500);
const cases: Array<[string, UnitPaths, Buffer[]]> = [
  ['OpenAI stream, usage.total_tokens', parseUnitPaths('usage.total_tokens'), openai],
  ['OpenAI stream, every event parsed (choices.x)', parseUnitPaths('choices.x'), openai],
  [
    'Anthropic stream, input + output tokens',
    parseUnitPaths(['message.usage.input_tokens', 'usage.output_tokens']),
    anthropic,
  ],
  ['Anthropic stream, every event parsed (type.x)', parseUnitPaths('type.x'), anthropic],
  [
    'OpenAI stream in 16-byte chunks',
    parseUnitPaths('usage.total_tokens'),
    sliced(Buffer.concat(openai), 16),
  ],
];

function sliced(bytes: Buffer, size: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
  return chunks;
}

for (const [name, paths, chunks] of cases) {
  const events = name.includes('16-byte') ? openai.length : chunks.length;
  const { perEvent, units } = cost(paths, chunks, 400);
  const perStreamEvent = (perEvent * chunks.length) / events;
  console.log(
    `${name}: ${perStreamEvent.toFixed(3)} µs CPU per event, ${Math.round(1e6 / perStreamEvent).toLocaleString('en')} events/s (units ${units})`,
  );
}
