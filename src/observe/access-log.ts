import type { EventEmitter } from 'node:events';
import { fstatSync } from 'node:fs';
import path from 'node:path';
import { systemClock, type Clock } from '../kit/clock.js';
import { integerText } from '../kit/integer-text.js';
import {
  bindingsOf,
  destinationOf,
  logDestination,
  type LogDestination,
  type LogSecrets,
  type Logger,
} from './log.js';

/** What the access line says of one request. */
export interface AccessEntry {
  requestId: string;
  client: string;
  verb: string;
  /** As routed, without the query. */
  path: string;
  /** The HTTP version the client spoke. */
  protocol: 'HTTP/1.0' | 'HTTP/1.1' | 'HTTP/2';
  api: string | null;
  method: string | null;
  application: string | null;
  subject: string | null;
  /** The auth plugin declined to validate the URL. */
  unvalidated: boolean;
  status: number;
  bytesIn: number;
  bytesOut: number;
  upstreamMs: number | null;
  /** Of an API with a pool of targets: the origin of the target that answered (the last tried); else null. */
  target: string | null;
  /** Of an API with a pool of targets: how many targets were tried; 0 for the one-URL form. */
  tried: number;
  outcome: string | null;
  quota: string | null;
  /** On a 429: the restrictions that refused, `<quota id>/<index>` (comma-separated), as RateLimit names them. */
  refusedBy: string | null;
  /** Why the gateway refused it, when its answer says so (`https_required`). */
  reason: string | null;
  ms: number;
  /** The line stands for this many 429 answers (`accessLog.sample429`); 1 when it stands for itself. */
  sampled: number;
  /**
   * Of a WebSocket (written when it closed): how it ended, `closed` by a side or by the gateway for
   * `quota`, `revoked`, `expired`, `shutdown`, `protocol_error` or `ping_timeout`; null for any other
   * request.
   */
  webSocket: string | null;
  /** Of any other exchange the gateway ended while it ran: `quota`, `revoked` or `expired`; else null. */
  endedBy: string | null;
  /**
   * Of a gRPC call: the gRPC status its client was given (the upstream's, or the gateway's own); null
   * for any other request, and for a call whose client left before it was given one.
   */
  grpcStatus: number | null;
  /**
   * With tracing on: the trace id of the exchange (sampled or not: the client's when it sent a valid
   * `traceparent`), so that a line leads to its trace; null with tracing off.
   */
  traceId?: string | null;
}

export interface AccessLogOptions {
  destination: LogDestination;
  /** Called with the number of lines the destination dropped (more than `maxWaitingLogBytes` waited). */
  onDropped?: (lines: number) => void;
  /** The destination is the access log's own file: `reopen` opens it again, `close` closes it. */
  ownsDestination?: boolean;
  /** The fields every line carries after `time`, as JSON text beginning with a comma (pino's bindings). */
  bindings: string;
  /** Values taken out of the strings a client chooses (request id, path, subject). */
  secrets?: LogSecrets;
  /** Milliseconds a line may wait for the lines after it; 0 writes every line at once. */
  flushMs: number;
  /**
   * Bytes one write holds at most, whole lines only: writes to a pipe shared with other processes stay
   * whole up to PIPE_BUF (4,096 bytes on Linux).
   */
  writeBytes: number;
  /**
   * Whether `writeBytes` must hold exactly (a shared pipe); otherwise a line's characters stand for its
   * bytes, and a write of lines with names beyond ASCII may hold a few times `writeBytes`.
   */
  exactBytes?: boolean;
  clock: Clock;
}

// JSON.stringify escapes quotes, backslashes, control characters and lone surrogates; a string without
// them is written as it is. Control characters are what this pattern is for.
// eslint-disable-next-line no-control-regex
const needsEscape = /["\\\u0000-\u001f\ud800-\udfff]/;
const jsonText = (value: string): string => (needsEscape.test(value) ? JSON.stringify(value) : `"${value}"`);
const jsonTextOrNull = (value: string | null): string => (value === null ? 'null' : jsonText(value));

/** Past this many hundredths a double's shortest text may hold fewer decimals than two (2^44 and up). */
const largestHundredths = 2 ** 31 - 1;

/**
 * A duration of hundredths of a millisecond as JavaScript writes it (`1.2`, `0.05`, `3`), from integers:
 * writing a fractional double takes V8 several times longer than writing the two integers it is made of
 * (issue 35). Any other number (more decimals, negative, or past 2^31 hundredths: six hours, beyond which
 * a double's shortest text may have fewer decimals) is written by V8.
 */
export function millisecondsText(value: number): string {
  const hundredths = Math.round(value * 100);
  if (hundredths / 100 !== value || hundredths < 0 || hundredths > largestHundredths) return String(value);
  const fraction = hundredths % 100;
  const whole = (hundredths - fraction) / 100;
  if (fraction === 0) return `${whole}`;
  if (fraction % 10 === 0) return `${whole}.${fraction / 10}`;
  return fraction < 10 ? `${whole}.0${fraction}` : `${whole}.${fraction}`;
}

/** Bytes of an access line, about: 250 to 400 (a short path and names, or long ones). */
const typicalLineBytes = 256;

/** Names quoted once: an API, method or application name, a verb, an outcome repeat on every line. */
const mostQuotedNames = 1_024;

/** The access logs not closed yet, whose lines the process's exit writes. */
const open = new Set<AccessLog>();
const flushAllOnExit = () => {
  for (const log of open) log.flushOnExit();
};

/**
 * The access log: one JSON line per request, in pino's format (`level`, `time`, the logger's bindings,
 * the fields, `msg`), written as prepared text instead of through pino's generic path: the fields are
 * known in advance, so no object is walked and no hook runs per line. Lines are gathered and handed to
 * the destination together: about `writeBytes` of them (one line per `typicalLineBytes`), or `flushMs`
 * after the first line waiting, whichever comes first (as Envoy's file access log does, at 64 KiB or
 * 1 s), in writes of at most `writeBytes`, whole lines. A line is gathered as its entry and made into
 * text when handed over: made one after another, the lines are made while the code and names that make
 * them are warm in the processor's caches, which on a crowded machine costs less than making each
 * line between two requests (issue 35, docs/performance.md). The destination bounds what waits for a
 * slow disk or pipe (pino's `maxLength`); `flush` hands over what is gathered now (SIGUSR2, reopen,
 * shutdown), and the process's exit does too.
 */
export class AccessLog {
  /** JSON texts of the names the config and the gateway give (not of what a client chooses), by name. */
  private readonly quotedNames = new Map<string, string>();
  /** What each line gathered will say, and when it was written (`time`): made into text when handed over. */
  private entries: AccessEntry[] = [];
  private times: number[] = [];
  /** Lines gathered at most before they are handed over: about `writeBytes` of them. */
  private readonly mostEntries: number;
  private timer: unknown = null;
  private closed = false;
  /** Milliseconds a line may wait for the lines after it; 0 writes every line at once (a reload sets it). */
  flushMs: number;

  constructor(private readonly options: AccessLogOptions) {
    this.flushMs = options.flushMs;
    this.mostEntries = Math.max(1, Math.floor(options.writeBytes / typicalLineBytes));
    open.add(this);
    if (open.size === 1) process.on('exit', flushAllOnExit);
    (options.destination as Partial<EventEmitter>).on?.('drop', this.dropped);
  }

  write(entry: AccessEntry): void {
    if (this.closed) return;
    this.entries.push(entry);
    this.times.push(this.options.clock.now());
    if (this.flushMs === 0 || this.entries.length >= this.mostEntries) this.flush();
    else if (this.timer === null) this.timer = this.options.clock.setTimeout(this.flushLater, this.flushMs);
  }

  /** Makes the lines gathered so far, and hands them to the destination in writes of `writeBytes` at most. */
  flush(): void {
    if (this.timer !== null) {
      this.options.clock.clearTimeout(this.timer);
      this.timer = null;
    }
    const { entries, times } = this;
    if (entries.length === 0) return;
    this.entries = [];
    this.times = [];
    let chunk = '';
    let chunkBytes = 0;
    for (let i = 0; i < entries.length; i += 1) {
      const line = this.format(entries[i]!, times[i]!);
      // Counting bytes flattens the line: only a write that must stay within PIPE_BUF needs them.
      const bytes = this.options.exactBytes ? Buffer.byteLength(line) : line.length;
      if (chunkBytes > 0 && chunkBytes + bytes > this.options.writeBytes) {
        this.options.destination.write(chunk);
        chunk = '';
        chunkBytes = 0;
      }
      chunk += line;
      chunkBytes += bytes;
    }
    this.options.destination.write(chunk);
  }

  /** Flushes, then opens the access log's own file again (logrotate has moved it). */
  reopen(): void {
    this.flush();
    if (this.options.ownsDestination) this.options.destination.reopen?.();
  }

  /** Flushes, and writes no more lines; closes the access log's own file. */
  close(): void {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    open.delete(this);
    if (open.size === 0) process.off('exit', flushAllOnExit);
    (this.options.destination as Partial<EventEmitter>).off?.('drop', this.dropped);
    if (this.options.ownsDestination) this.options.destination.end?.();
  }

  /** SonicBoom's 'drop' listener: what it was handed while more than its bound waited. */
  private readonly dropped = (data: string | Buffer): void => {
    let lines = 0;
    for (let at = data.indexOf('\n'); at !== -1; at = data.indexOf('\n', at + 1)) lines += 1;
    this.options.onDropped?.(lines);
  };

  private readonly flushLater = (): void => {
    this.timer = null;
    this.flush();
  };

  /** At exit nothing asynchronous runs: the lines gathered go, and the destination writes them now. */
  flushOnExit(): void {
    try {
      this.flush();
      this.options.destination.flushSync?.();
    } catch {
      // The destination is gone or not ready: nothing more can be written.
    }
  }

  /**
   * The JSON text of a name from a small set (the config's API, method and application names, verbs,
   * outcomes), quoted once: the escape check and the quoted copy are then not made per line. Bounded:
   * past `mostQuotedNames` (many reloads of renamed APIs), further names are quoted each time.
   */
  private quoted(name: string | null): string {
    if (name === null) return 'null';
    let text = this.quotedNames.get(name);
    if (text === undefined) {
      text = jsonText(name);
      if (this.quotedNames.size < mostQuotedNames) this.quotedNames.set(name, text);
    }
    return text;
  }

  /** `value` without the config's secrets: a client may send a key as its request id or in its path. */
  private clean(value: string): string {
    return this.options.secrets ? this.options.secrets.remove(value) : value;
  }

  private format(entry: AccessEntry, time: number): string {
    const subject = entry.subject === null ? null : this.clean(entry.subject);
    return (
      `{"level":30,"time":${integerText(time)}${this.options.bindings}` +
      `,"requestId":${jsonText(this.clean(entry.requestId))},"client":${jsonText(entry.client)}` +
      `,"verb":${this.quoted(entry.verb)},"path":${jsonText(this.clean(entry.path))}` +
      `,"protocol":"${entry.protocol}"` +
      `,"api":${this.quoted(entry.api)},"method":${this.quoted(entry.method)}` +
      `,"application":${this.quoted(entry.application)},"subject":${jsonTextOrNull(subject)}` +
      (entry.unvalidated ? ',"unvalidated":true' : '') +
      `,"status":${entry.status},"bytesIn":${entry.bytesIn},"bytesOut":${entry.bytesOut}` +
      `,"upstreamMs":${entry.upstreamMs === null ? 'null' : millisecondsText(entry.upstreamMs)}` +
      (entry.tried === 0 ? '' : `,"target":${this.quoted(entry.target)},"tried":${entry.tried}`) +
      `,"outcome":${this.quoted(entry.outcome)},"quota":${this.quoted(entry.quota)}` +
      (entry.refusedBy === null ? '' : `,"refusedBy":${jsonText(entry.refusedBy)}`) +
      (entry.reason === null ? '' : `,"reason":${jsonText(entry.reason)}`) +
      `,"ms":${millisecondsText(entry.ms)}` +
      (entry.sampled > 1 ? `,"sampled":${entry.sampled}` : '') +
      (entry.webSocket === null ? '' : `,"webSocket":${jsonText(entry.webSocket)}`) +
      (entry.endedBy === null ? '' : `,"endedBy":"${entry.endedBy}"`) +
      (entry.grpcStatus === null ? '' : `,"grpcStatus":${entry.grpcStatus}`) +
      (!entry.traceId ? '' : `,"traceId":"${entry.traceId}"`) +
      ',"msg":"request"}\n'
    );
  }
}

/** Bytes a write to a regular file (or a destination no other process shares) may hold. */
const largestWrite = 65_536;
/** Linux's PIPE_BUF: a write to a pipe or socket up to this size is never interleaved with another's. */
const pipeBuffer = 4_096;

export interface AccessLogSettings {
  /** `accessLog.file`, relative to `cwd`; without it the lines go with the rest of the log. */
  file?: string | undefined;
  flushMs: number;
}

/**
 * The access log of a gateway: in its own file (`accessLog.file`) or with the rest of `logger`'s lines,
 * each line with `logger`'s bindings; null when the log level leaves access lines out (above `info`).
 * @param sharesOutput other processes write to the same stdout (the workers of `workers: N`): a write
 *   to a pipe then holds at most PIPE_BUF bytes, so that no two lines interleave.
 */
export function openAccessLog(
  settings: AccessLogSettings,
  options: {
    logger: Logger;
    cwd: string;
    secrets?: LogSecrets;
    sharesOutput: boolean;
    onDropped?: (lines: number) => void;
  },
): AccessLog | null {
  const { logger } = options;
  if (!logger.isLevelEnabled('info')) return null;
  const file = settings.file ? logDestination(path.resolve(options.cwd, settings.file)) : null;
  const destination = file ?? destinationOf(logger);
  const fd = (destination as { fd?: unknown }).fd;
  const toPipe = typeof fd === 'number' && fd >= 0 && isPipe(fd);
  return new AccessLog({
    destination,
    ownsDestination: file !== null,
    bindings: `${bindingsOf(logger)},"component":"access"`,
    ...(options.secrets ? { secrets: options.secrets } : {}),
    flushMs: settings.flushMs,
    ...(toPipe && options.sharesOutput
      ? { writeBytes: pipeBuffer, exactBytes: true }
      : { writeBytes: largestWrite }),
    clock: systemClock,
    ...(options.onDropped ? { onDropped: options.onDropped } : {}),
  });
}

function isPipe(fd: number): boolean {
  try {
    const stat = fstatSync(fd);
    return stat.isFIFO() || stat.isSocket();
  } catch {
    return true;
  }
}
