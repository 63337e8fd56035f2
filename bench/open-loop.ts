import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { build, type Histogram } from 'hdr-histogram-js';

// An open-loop load generator, run as its own process:
//   node dist/bench/open-loop.js --url URL --rate 2000 --seconds 6 [--warmup-seconds 1]
//                                [--header 'name: value'] … [--max-connections 256] [--drain-ms 2000]
// Requests are scheduled at a fixed rate and sent on schedule whether or not earlier ones were answered,
// each on an idle keep-alive connection, or on a new one while the pool is under its cap. Latency runs
// from a request's scheduled time, not from when it was sent, so a stalled server (or generator) shows in
// the latency of every request it delayed (no coordinated omission). Prints one JSON line (OpenLoopResult).

/** Latency percentiles, in milliseconds. */
export interface Percentiles {
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

export interface OpenLoopResult {
  rate: number;
  seconds: number;
  /** Requests scheduled in the recorded seconds (the warm-up's are not recorded). */
  scheduled: number;
  /** Recorded requests answered, whatever the status. */
  completed: number;
  non2xx: number;
  /** Recorded requests whose connection failed or closed before the answer. */
  errors: number;
  /** Requests sent again because the server closed their kept-alive connection before any answer. */
  retried: number;
  /** Recorded requests that found every connection of a full pool busy and waited for one. */
  late: number;
  /** Recorded requests still unanswered `--drain-ms` after the last was scheduled. */
  unanswered: number;
  /** Answers to all requests, warm-up included: what the server did while its CPU time was read. */
  answeredTotal: number;
  /** Most connections open at once. */
  connections: number;
  /** From the scheduled time to the end of the answer. */
  latencyMs: Percentiles;
  /** From the scheduled time to the write: the generator's own lateness, part of latencyMs. */
  sendLagMs: Percentiles;
}

interface Scheduled {
  scheduledAt: number;
  recorded: boolean;
  /** When it was first written (0 until then). */
  sentAt: number;
  /** Sent again once already (never twice). */
  retried: boolean;
}

interface Answer {
  status: number;
  keepAlive: boolean;
}

/** Milliseconds since the epoch, to a fraction of a microsecond; comparable across this process's threads. */
const now = () => performance.timeOrigin + performance.now();

const crlf = Buffer.from('\r\n');
const headEnd = Buffer.from('\r\n\r\n');

/**
 * A minimal HTTP/1.1 response reader for one connection: status line and headers, then a body delimited
 * by Content-Length, by chunked transfer coding (RFC 9112 §7.1), or by the close of the connection.
 */
class ResponseReader {
  private buffer: Buffer = Buffer.alloc(0);
  private state: 'head' | 'body' | 'chunk-size' | 'chunk-data' | 'trailers' | 'until-close' = 'head';
  private remaining = 0;
  private answer: Answer = { status: 0, keepAlive: true };

  /** Reads a chunk of the stream; returns the answers it completed (at most one without pipelining). */
  push(chunk: Buffer, answers: Answer[]): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    for (;;) {
      if (this.state === 'head') {
        const end = this.buffer.indexOf(headEnd);
        if (end < 0) return;
        this.readHead(this.buffer.toString('latin1', 0, end));
        this.buffer = this.buffer.subarray(end + headEnd.length);
      } else if (this.state === 'body' || this.state === 'chunk-data') {
        const taken = Math.min(this.remaining, this.buffer.length);
        this.remaining -= taken;
        this.buffer = this.buffer.subarray(taken);
        if (this.remaining > 0) return;
        if (this.state === 'body') this.complete(answers);
        else this.state = 'chunk-size';
      } else if (this.state === 'chunk-size' || this.state === 'trailers') {
        const end = this.buffer.indexOf(crlf);
        if (end < 0) return;
        const line = this.buffer.toString('latin1', 0, end);
        this.buffer = this.buffer.subarray(end + crlf.length);
        if (this.state === 'trailers') {
          if (line === '') this.complete(answers);
        } else {
          // chunk-size [ chunk-ext ] CRLF; the data is followed by its own CRLF.
          const size = Number.parseInt(line.split(';')[0]!.trim(), 16);
          if (!Number.isFinite(size)) throw new Error(`bad chunk size line: ${line}`);
          if (size === 0) this.state = 'trailers';
          else {
            this.state = 'chunk-data';
            this.remaining = size + crlf.length;
          }
        }
      } else {
        this.buffer = Buffer.alloc(0); // 'until-close': the answer ends with the connection
        return;
      }
    }
  }

  /** The connection ended: completes an answer delimited by the close; true if one was cut short. */
  end(answers: Answer[]): boolean {
    if (this.state === 'until-close') {
      this.answer.keepAlive = false;
      this.complete(answers);
      return false;
    }
    return this.state !== 'head' || this.buffer.length > 0;
  }

  private readHead(head: string): void {
    const [statusLine = '', ...fields] = head.split('\r\n');
    const [version = '', status = ''] = statusLine.split(' ');
    const headers = new Map<string, string>();
    for (const field of fields) {
      const colon = field.indexOf(':');
      if (colon > 0) headers.set(field.slice(0, colon).trim().toLowerCase(), field.slice(colon + 1).trim());
    }
    const code = Number(status);
    const connection = (headers.get('connection') ?? '').toLowerCase();
    this.answer = {
      status: code,
      keepAlive: version === 'HTTP/1.1' ? !connection.includes('close') : connection.includes('keep-alive'),
    };
    if (code >= 100 && code < 200) return; // an interim answer: the final one follows
    const length = headers.get('content-length');
    if ((headers.get('transfer-encoding') ?? '').toLowerCase().includes('chunked')) {
      this.state = 'chunk-size';
    } else if (code === 204 || code === 304) {
      this.remaining = 0;
      this.state = 'body';
    } else if (length !== undefined) {
      this.remaining = Number(length);
      this.state = 'body';
    } else {
      this.state = 'until-close';
    }
  }

  private complete(answers: Answer[]): void {
    answers.push(this.answer);
    this.state = 'head';
  }
}

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    rate: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '10' },
    'warmup-seconds': { type: 'string', default: '1' },
    header: { type: 'string', multiple: true, default: [] },
    'max-connections': { type: 'string', default: '256' },
    'drain-ms': { type: 'string', default: '2000' },
  },
});
if (!values.url) throw new Error('open-loop: --url is required');
const url = new URL(values.url);
if (url.protocol !== 'http:') throw new Error('open-loop: only http:// URLs');
const rate = Number(values.rate);
const seconds = Number(values.seconds);
const warmupSeconds = Number(values['warmup-seconds']);
const maxConnections = Number(values['max-connections']);
const drainMs = Number(values['drain-ms']);
if (!(rate > 0 && seconds > 0 && warmupSeconds >= 0 && maxConnections >= 1)) {
  throw new Error('open-loop: --rate, --seconds and --max-connections must be positive');
}

const request = Buffer.from(
  [
    `GET ${url.pathname}${url.search} HTTP/1.1`,
    `host: ${url.host}`,
    ...values.header.map((header) => header.trim()),
    '',
    '',
  ].join('\r\n'),
  'latin1',
);

// Microseconds, 1 µs to 60 s at 3 significant digits.
const histogram = () => build({ lowestDiscernibleValue: 1, highestTrackableValue: 60e6 });
const latency = histogram();
const sendLag = histogram();
const counts = { completed: 0, non2xx: 0, errors: 0, retried: 0, late: 0, answeredTotal: 0 };

class Connection {
  readonly socket: net.Socket;
  current: Scheduled | null = null;
  private readonly reader = new ResponseReader();
  private readonly answers: Answer[] = [];
  private closed = false;
  /** Answers read on this connection so far. */
  private served = 0;
  /** Whether any byte of the current request's answer has come. */
  private receiving = false;

  constructor() {
    this.socket = net.connect({ host: url.hostname, port: Number(url.port || 80), noDelay: true });
    this.socket.on('data', (chunk: Buffer) => {
      this.receiving = true;
      try {
        this.reader.push(chunk, this.answers);
      } catch {
        this.socket.destroy();
        return;
      }
      for (const answer of this.answers.splice(0)) this.answered(answer);
    });
    this.socket.on('end', () => {
      this.reader.end(this.answers);
      for (const answer of this.answers.splice(0)) this.answered(answer);
      this.socket.destroy();
    });
    this.socket.on('error', () => this.socket.destroy());
    this.socket.on('close', () => this.lost());
  }

  send(scheduled: Scheduled): void {
    this.current = scheduled;
    this.receiving = false;
    scheduled.sentAt ||= now();
    this.socket.write(request);
  }

  private answered(answer: Answer): void {
    const scheduled = this.current;
    if (!scheduled) return;
    this.current = null;
    this.served += 1;
    counts.answeredTotal += 1;
    if (scheduled.recorded) {
      latency.recordValue(Math.max(1, Math.round((now() - scheduled.scheduledAt) * 1000)));
      sendLag.recordValue(Math.max(1, Math.round((scheduled.sentAt - scheduled.scheduledAt) * 1000)));
      counts.completed += 1;
      if (answer.status < 200 || answer.status >= 300) counts.non2xx += 1;
    }
    if (answer.keepAlive) released(this);
    else this.socket.end();
    if (finishing && inFlight() === 0) finish();
  }

  private lost(): void {
    if (this.closed) return;
    this.closed = true;
    // A kept-alive connection the server closed as the request went out (its idle timeout): nothing of
    // the request was answered, so it is sent again, as HTTP clients do for an idempotent request
    // (RFC 9110 §9.2.2), its latency still counted from its scheduled time.
    const retry =
      this.current && this.served > 0 && !this.receiving && !this.current.retried ? this.current : null;
    if (retry) {
      retry.retried = true;
      counts.retried += 1;
    } else if (this.current?.recorded) counts.errors += 1;
    this.current = null;
    removed(this, retry);
  }
}

const idle: Connection[] = [];
const open = new Set<Connection>();
const waiting: Scheduled[] = [];
let mostOpen = 0;

function connect(): Connection {
  const connection = new Connection();
  open.add(connection);
  mostOpen = Math.max(mostOpen, open.size);
  return connection;
}

/** Sends a request now: on the most recently idle connection, on a new one, or once one is free. */
function dispatch(scheduled: Scheduled): void {
  const connection = idle.pop() ?? (open.size < maxConnections ? connect() : null);
  if (connection) {
    connection.send(scheduled);
  } else {
    if (scheduled.recorded) counts.late += 1;
    waiting.push(scheduled);
  }
}

function released(connection: Connection): void {
  const next = waiting.shift();
  if (next) connection.send(next);
  else idle.push(connection);
}

function removed(connection: Connection, retry: Scheduled | null): void {
  open.delete(connection);
  const at = idle.indexOf(connection);
  if (at >= 0) idle.splice(at, 1);
  if (finished) return;
  if (retry) waiting.unshift(retry);
  while (waiting.length > 0 && (idle.length > 0 || open.size < maxConnections)) {
    (idle.pop() ?? connect()).send(waiting.shift()!);
  }
  if (finishing && inFlight() === 0) finish();
}

const inFlight = () => waiting.length + [...open].filter((connection) => connection.current).length;

// The schedule: request i at start + i / rate. libuv's timers tick in whole milliseconds, which would
// hold a request up to 1 ms past its time; a clock thread instead sleeps (Atomics.wait, a futex: no
// spinning) until each request is due and wakes this thread, which sends every request that has come due.
// What lateness remains is measured (sendLagMs) and counted in the latency.
const interval = 1000 / rate;
const warmupCount = Math.round(rate * warmupSeconds);
const total = warmupCount + Math.round(rate * seconds);
const start = now() + 50;
let next = 0;
let finishing = false;
let drainTimer: NodeJS.Timeout | undefined;

const clockThread = `
const { parentPort, workerData: { start, interval, total } } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const now = () => performance.timeOrigin + performance.now();
const cell = new Int32Array(new SharedArrayBuffer(4));
let next = 0;
while (next < total) {
  const at = now();
  const due = start + next * interval;
  if (due > at) {
    Atomics.wait(cell, 0, 0, due - at);
  } else {
    parentPort.postMessage(0);
    next = Math.min(total, Math.floor((at - start) / interval) + 1);
  }
}
`;
const clock = new Worker(clockThread, { eval: true, workerData: { start, interval, total } });
clock.on('message', () => tick(false));
// Its last wake-up may come a hair early by this thread's clock: whatever is left is due now.
clock.on('exit', () => tick(true));
clock.on('error', (error) => {
  throw error;
});

function tick(all: boolean): void {
  const at = now();
  while (next < total && (all || start + next * interval <= at)) {
    dispatch({
      scheduledAt: start + next * interval,
      recorded: next >= warmupCount,
      sentAt: 0,
      retried: false,
    });
    next += 1;
  }
  if (next < total || finishing) return;
  finishing = true;
  if (inFlight() === 0) finish();
  else drainTimer = setTimeout(finish, drainMs);
}

const percentiles = (h: Histogram): Percentiles => ({
  p50: h.getValueAtPercentile(50) / 1000,
  p99: h.getValueAtPercentile(99) / 1000,
  p999: h.getValueAtPercentile(99.9) / 1000,
  max: h.maxValue / 1000,
});

let finished = false;
function finish(): void {
  if (finished) return;
  finished = true;
  clearTimeout(drainTimer);
  const unanswered =
    waiting.filter((scheduled) => scheduled.recorded).length +
    [...open].filter((connection) => connection.current?.recorded).length;
  const result: OpenLoopResult = {
    rate,
    seconds,
    scheduled: total - warmupCount,
    ...counts,
    unanswered,
    connections: mostOpen,
    latencyMs: percentiles(latency),
    sendLagMs: percentiles(sendLag),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  for (const connection of open) connection.socket.destroy();
}
