import { EventEmitter } from 'node:events';
import { mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AccessLog, millisecondsText, type AccessEntry } from '../../src/observe/access-log.js';
import { LogSecrets, logDestination } from '../../src/observe/log.js';
import { FakeClock } from '../helpers/fake-clock.js';

const entry = (overrides: Partial<AccessEntry> = {}): AccessEntry => ({
  requestId: 'req-1',
  client: '127.0.0.1',
  verb: 'GET',
  path: '/pets/1',
  protocol: 'HTTP/1.1',
  api: 'Pet Store',
  method: 'getPet',
  application: 'Mobile app',
  subject: 'mobile',
  unvalidated: false,
  status: 200,
  bytesIn: 0,
  bytesOut: 11,
  upstreamMs: 0.42,
  target: null,
  tried: 0,
  outcome: 'completed',
  quota: 'allowed',
  refusedBy: null,
  reason: null,
  ms: 1.37,
  sampled: 1,
  webSocket: null,
  endedBy: null,
  grpcStatus: null,
  ...overrides,
});

/** A destination that keeps every write it is handed, as handed. */
function recorder() {
  const writes: string[] = [];
  return {
    writes,
    destination: { write: (chunk: string) => writes.push(chunk) },
    lines: () => writes.join('').split('\n').filter(Boolean),
  };
}

const open: AccessLog[] = [];
afterEach(() => {
  for (const log of open.splice(0)) log.close();
});

function accessLog(options: Partial<ConstructorParameters<typeof AccessLog>[0]> = {}) {
  const out = recorder();
  const clock = new FakeClock(1_800_000_000_000);
  const log = new AccessLog({
    destination: out.destination,
    bindings: ',"service":"quotagate","component":"access"',
    flushMs: 1_000,
    writeBytes: 65_536,
    clock,
    ...options,
  });
  open.push(log);
  return { log, out, clock };
}

describe('access log', () => {
  it('writes the lines pino would, in its field order, each one JSON', () => {
    const { log, out } = accessLog({ flushMs: 0 });
    log.write(entry());
    log.write(entry({ unvalidated: true, status: 429, sampled: 100, upstreamMs: null, subject: null }));
    const [first, second] = out.lines();
    expect(first).toBe(
      '{"level":30,"time":1800000000000,"service":"quotagate","component":"access","requestId":"req-1",' +
        '"client":"127.0.0.1","verb":"GET","path":"/pets/1","protocol":"HTTP/1.1","api":"Pet Store",' +
        '"method":"getPet",' +
        '"application":"Mobile app","subject":"mobile","status":200,"bytesIn":0,"bytesOut":11,' +
        '"upstreamMs":0.42,"outcome":"completed","quota":"allowed","ms":1.37,"msg":"request"}',
    );
    expect(JSON.parse(second!)).toMatchObject({
      unvalidated: true,
      status: 429,
      sampled: 100,
      upstreamMs: null,
      subject: null,
    });
  });

  it('writes durations as JavaScript writes the numbers, hundredths made from integers', () => {
    for (let hundredths = 0; hundredths <= 200_000; hundredths += 1) {
      const ms = hundredths / 100;
      if (millisecondsText(ms) !== String(ms)) expect(millisecondsText(ms)).toBe(String(ms));
    }
    for (const ms of [
      1.005,
      0.001,
      -1.5,
      2 ** 60,
      1e21,
      21_474_836.48,
      123_456_789.12,
      Number.MAX_SAFE_INTEGER / 100,
    ])
      expect(millisecondsText(ms)).toBe(String(ms));
    const { log, out } = accessLog({ flushMs: 0 });
    log.write(entry({ upstreamMs: 0.05, ms: 65_000.5 }));
    expect(out.lines()[0]).toContain(
      '"upstreamMs":0.05,"outcome":"completed","quota":"allowed","ms":65000.5,',
    );
  });

  it('quotes a name once and the same way on every line, escaping it when it must', () => {
    const { log, out } = accessLog({ flushMs: 0 });
    const application = 'say "hi"';
    for (let i = 0; i < 3; i += 1) log.write(entry({ application, api: `API ${i % 2}` }));
    const parsed = out.lines().map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(parsed.map((line) => [line.application, line.api])).toEqual([
      [application, 'API 0'],
      [application, 'API 1'],
      [application, 'API 0'],
    ]);
  });

  it('says how a WebSocket ended on its line, and nothing of the kind on an HTTP line', () => {
    const { log, out } = accessLog({ flushMs: 0 });
    log.write(entry({ status: 101, bytesIn: 1_206, bytesOut: 1_102, ms: 65_000.5, webSocket: 'quota' }));
    log.write(entry());
    const [webSocket, plain] = out.lines().map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(webSocket).toMatchObject({ status: 101, bytesIn: 1_206, bytesOut: 1_102, webSocket: 'quota' });
    expect(Object.keys(webSocket!).at(-2)).toBe('webSocket');
    expect(plain).not.toHaveProperty('webSocket');
  });

  it('names the target of a pool that answered and how many were tried, and nothing of the kind for one URL', () => {
    const { log, out } = accessLog({ flushMs: 0 });
    log.write(entry({ target: 'http://10.0.0.2:9000', tried: 2 }));
    log.write(entry({ status: 503, target: null, tried: 3 }));
    log.write(entry());
    const [answered, none, plain] = out.lines().map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(answered).toMatchObject({ target: 'http://10.0.0.2:9000', tried: 2 });
    expect(none).toMatchObject({ target: null, tried: 3 });
    expect(plain).not.toHaveProperty('target');
    expect(plain).not.toHaveProperty('tried');
  });

  it("says the gRPC status a call's client was given on its line, and nothing of the kind on others", () => {
    const { log, out } = accessLog({ flushMs: 0 });
    log.write(entry({ protocol: 'HTTP/2', outcome: 'invalid', grpcStatus: 13 }));
    log.write(entry({ protocol: 'HTTP/2', grpcStatus: 0 }));
    log.write(entry());
    const [failed, ok, plain] = out.lines().map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(failed).toMatchObject({ status: 200, outcome: 'invalid', grpcStatus: 13 });
    expect(Object.keys(failed!).at(-2)).toBe('grpcStatus');
    expect(ok).toMatchObject({ grpcStatus: 0 });
    expect(plain).not.toHaveProperty('grpcStatus');
  });

  it('escapes what a client put in a path, and names with quotes or control characters', () => {
    const { log, out } = accessLog({ flushMs: 0 });
    const path = '/pets/"quoted"\\back';
    const application = 'Tab\there, line\nthere, and \u0001';
    log.write(entry({ path, application, subject: '\ud800 lone surrogate' }));
    const parsed = JSON.parse(out.lines()[0]!) as Record<string, unknown>;
    expect(parsed).toMatchObject({ path, application });
    expect(out.lines()).toHaveLength(1);
  });

  it('takes the secrets of the config out of request ids, paths and subjects', () => {
    const key = 'k-0123456789abcdef';
    const { log, out } = accessLog({ flushMs: 0, secrets: new LogSecrets([key]) });
    log.write(entry({ requestId: key, path: `/pets/${key}`, subject: `user ${key}` }));
    expect(out.writes.join('')).not.toContain(key);
    expect(JSON.parse(out.lines()[0]!)).toMatchObject({
      requestId: '[REDACTED]',
      path: '/pets/[REDACTED]',
      subject: 'user [REDACTED]',
    });
  });

  it('gathers lines and hands them over together once flushMs has passed since the first', async () => {
    const { log, out, clock } = accessLog({ flushMs: 1_000 });
    log.write(entry({ requestId: 'a' }));
    await clock.advance(600);
    log.write(entry({ requestId: 'b' }));
    await clock.advance(399);
    expect(out.writes).toEqual([]);
    await clock.advance(1);
    expect(out.writes).toHaveLength(1);
    expect(out.lines().map((line) => (JSON.parse(line) as { requestId: string }).requestId)).toEqual([
      'a',
      'b',
    ]);
    expect(clock.pending).toBe(0);
  });

  it('says on each line when it was written, though it is made when it is handed over', async () => {
    const { log, out, clock } = accessLog({ flushMs: 1_000 });
    const first = clock.now();
    log.write(entry({ requestId: 'a' }));
    await clock.advance(700);
    log.write(entry({ requestId: 'b' }));
    log.flush();
    expect(out.lines().map((line) => (JSON.parse(line) as { time: number }).time)).toEqual([
      first,
      first + 700,
    ]);
  });

  it('writes once about writeBytes of lines wait, in writes of whole lines within it', () => {
    const { log, out } = accessLog({ flushMs: 60_000, writeBytes: 1_000 });
    for (let i = 0; i < 20; i += 1) log.write(entry({ requestId: `r${i}` }));
    expect(out.writes.length).toBeGreaterThan(3);
    for (const chunk of out.writes) {
      expect(Buffer.byteLength(chunk)).toBeLessThanOrEqual(1_000);
      expect(chunk.endsWith('\n')).toBe(true);
    }
    log.flush();
    expect(out.lines()).toHaveLength(20);
  });

  it('counts bytes, not characters, against writeBytes when they must hold exactly (a shared pipe)', () => {
    const { log, out } = accessLog({ flushMs: 60_000, writeBytes: 1_000, exactBytes: true });
    for (let i = 0; i < 10; i += 1) log.write(entry({ application: 'Ünïcödé äpplication ✓✓✓✓✓✓✓✓✓✓' }));
    log.flush();
    for (const chunk of out.writes) expect(Buffer.byteLength(chunk)).toBeLessThanOrEqual(1_000);
    expect(out.lines()).toHaveLength(10);
  });

  it('writes what it gathered when closed, and nothing after', () => {
    const { log, out } = accessLog();
    log.write(entry());
    log.close();
    expect(out.lines()).toHaveLength(1);
    log.write(entry());
    log.flush();
    expect(out.lines()).toHaveLength(1);
  });

  it('counts the lines its destination drops when too much waits for it', () => {
    const dropped: number[] = [];
    const destination = new (class extends EventEmitter {
      write(chunk: string) {
        this.emit('drop', chunk);
      }
    })();
    const { log } = accessLog({ destination, flushMs: 0, onDropped: (lines) => dropped.push(lines) });
    log.write(entry());
    log.write(entry());
    expect(dropped).toEqual([1, 1]);
  });
});

describe('access log file', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('opens its file again on reopen: lines before go to the moved file, lines after to a new one', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'qg-access-'));
    dirs.push(dir);
    const file = path.join(dir, 'access.log');
    const destination = logDestination(file);
    const clock = new FakeClock();
    const log = new AccessLog({
      destination,
      ownsDestination: true,
      bindings: '',
      flushMs: 1_000,
      writeBytes: 65_536,
      clock,
    });
    open.push(log);
    log.write(entry({ requestId: 'before' }));
    await new Promise((resolve) => destination.once('ready', resolve));
    renameSync(file, `${file}.1`);
    log.reopen();
    await new Promise((resolve) => destination.once('ready', resolve));
    log.write(entry({ requestId: 'after' }));
    log.close();
    await new Promise((resolve) => destination.once('close', resolve));
    expect(readFileSync(`${file}.1`, 'utf8')).toContain('"requestId":"before"');
    expect(readFileSync(`${file}.1`, 'utf8')).not.toContain('"requestId":"after"');
    expect(readFileSync(file, 'utf8')).toContain('"requestId":"after"');
  });
});
