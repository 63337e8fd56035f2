import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { cpuSeconds } from './cpu-time.js';
import type { Running } from './processes.js';
import { benchAuthorization } from './quotagate.js';
import { median } from './report.js';
import { Setups, type Target } from './setups.js';

/**
 * The WebSocket row of the bench: messages relayed through quotagate as shipped (basic auth, the two
 * never-refusing restrictions, a throttlemb among them charged once a second, the access log) against
 * a bare http-proxy-3 `ws()` relay (the bytes quotagate's own path adds its work to) and a relay written
 * with the `ws` package (each message read whole and sent on), all in front of the same `ws` echo
 * upstream. Every setup is loaded
 * at the same time, round after round, by connections that each keep one message in flight (send, wait
 * for the echo, send again); CPU is each server's process time (user + system, from /proc) per message
 * relayed, a round trip being two.
 */
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '5' },
    'warmup-seconds': { type: 'string', default: '3' },
    connections: { type: 'string', default: '20' },
    bytes: { type: 'string', default: '128' },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const connections = Number(values.connections);
const message = Buffer.alloc(Number(values.bytes), 0x61);
const say = (line: string) => process.stderr.write(`${line}\n`);

/** A connection that keeps one message in flight while `running` says so, counting the round trips. */
interface PingPong {
  trips: number;
  ws: WebSocket;
}

async function openLoad(target: Target, count: number): Promise<PingPong[]> {
  const url = target.url.replace(/^http/, 'ws');
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<PingPong>((resolve, reject) => {
          const ws = new WebSocket(url, {
            headers: { authorization: benchAuthorization },
            perMessageDeflate: false,
          });
          const load: PingPong = { trips: 0, ws };
          ws.on('message', () => {
            load.trips += 1;
            if (running) ws.send(message);
          });
          ws.once('open', () => resolve(load));
          ws.once('error', reject);
        }),
    ),
  );
}

let running = false;

/** Runs every load for `ms`, each connection starting with one message in flight. */
async function runFor(loads: PingPong[][], ms: number): Promise<void> {
  running = true;
  for (const load of loads.flat()) load.ws.send(message);
  await new Promise((resolve) => setTimeout(resolve, ms));
  running = false;
  // Let the messages in flight come back before the next round reads the CPU.
  await new Promise((resolve) => setTimeout(resolve, 200));
}

const work = mkdtempSync(path.join(tmpdir(), 'quotagate-ws-bench-'));
const started: Running[] = [];
const track = async <T extends Running>(what: Promise<T>): Promise<T> => {
  const done = await what;
  started.push(done);
  return done;
};

try {
  const setups = new Setups(work, track);
  const upstream = await setups.node('ws upstream', 'ws-upstream.js', [], false);
  const origin = new URL(upstream.url).origin;
  const targets = [
    await setups.node('bare http-proxy-3 ws() relay', 'bare-ws-relay.js', [origin], false),
    await setups.node('`ws` package relay, message by message', 'ws-message-relay.js', [origin], false),
    await setups.quotagate(
      'quotagate as shipped, memory store',
      'ws-quotagate',
      origin,
      { type: 'memory' },
      {
        accessLog: true,
        quota: true,
      },
    ),
  ];
  const loads = await Promise.all(targets.map((target) => openLoad(target, connections)));
  say(`warming up (${values['warmup-seconds']} s)`);
  await runFor(loads, Number(values['warmup-seconds']) * 1_000);
  const perMessage: number[][] = targets.map(() => []);
  const rates: number[][] = targets.map(() => []);
  for (let round = 1; round <= rounds; round += 1) {
    say(`round ${round}/${rounds} (${seconds} s)`);
    const before = targets.map((target) => cpuSeconds(target.pid) ?? NaN);
    const tripsBefore = loads.map((load) => load.reduce((sum, one) => sum + one.trips, 0));
    await runFor(loads, seconds * 1_000);
    targets.forEach((target, i) => {
      const messages = 2 * (loads[i]!.reduce((sum, one) => sum + one.trips, 0) - tripsBefore[i]!);
      perMessage[i]!.push((((cpuSeconds(target.pid) ?? NaN) - before[i]!) * 1e6) / messages);
      rates[i]!.push(messages / seconds);
    });
  }
  for (const load of loads.flat()) load.ws.close();
  const bare = median(perMessage[0]!);
  const rows = targets.map((target, i) => {
    const cpu = median(perMessage[i]!);
    const ratios = perMessage[i]!.map((value, round) => value / perMessage[0]![round]!);
    return `| ${target.name} | ${Math.round(median(rates[i]!))} | ${cpu.toFixed(1)} | ${(cpu / bare).toFixed(2)}× | ${Math.min(...ratios).toFixed(2)}× – ${Math.max(...ratios).toFixed(2)}× |`;
  });
  process.stdout.write(
    `${connections} connections per setup, one ${message.length}-byte message in flight each, ${rounds} rounds of ${seconds} s, all setups at once\n\n` +
      '| Setup | messages/s | CPU µs/message | vs bare relay | lowest – highest round |\n' +
      '| --- | ---: | ---: | ---: | ---: |\n' +
      `${rows.join('\n')}\n`,
  );
} finally {
  for (const server of started.reverse()) await server.stop();
  rmSync(work, { recursive: true, force: true });
}
