import { once, type EventEmitter } from 'node:events';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { beforeDeadline } from '../kit/deadline.js';
import { redactError, redactedText, valueRemover, withoutCredentialFields } from '../kit/secret-redaction.js';

export type { Logger } from 'pino';

/** Paths whose values never reach a log line: credentials of clients, of admins and of the project. */
export const redactedPaths = [
  'req.headers.authorization',
  'req.headers.apikey',
  'req.headers["proxy-authorization"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers.apikey',
  'headers.cookie',
  'rawHeaders',
  '*.rawHeaders',
  '*.headers.authorization',
  '*.headers.cookie',
  'password',
  '*.password',
  'adminPassword',
  '*.adminPassword',
  'apikey',
  '*.apikey',
  'apikey_development',
  'apikey_production',
  '*.apikey_development',
  '*.apikey_production',
  'secret',
  '*.secret',
];

/**
 * Values never to write, wherever a line holds them (keys and passwords of the config). A reload adds
 * the new config's: a rotated-out key stays secret too.
 */
export class LogSecrets {
  private readonly values = new Set<string>();
  /** Takes the values out of text. */
  remove: (text: string) => string = (text) => text;
  /** Takes the values out of a JSON line, where quotes and backslashes are escaped. */
  removeFromJson: (text: string) => string = (text) => text;

  constructor(values: readonly string[] = []) {
    this.add(values);
  }

  add(values: readonly string[]): void {
    const before = this.values.size;
    for (const value of values) this.values.add(value);
    if (this.values.size === before) return;
    const all = [...this.values];
    this.remove = valueRemover(all);
    this.removeFromJson = valueRemover(all.map((secret) => JSON.stringify(secret).slice(1, -1)));
  }
}

export interface LoggerSettings {
  level?: string;
  /** Where lines go; when absent, stdout (pretty-printed only when stdout is a terminal). */
  destination?: DestinationStream;
  secrets?: LogSecrets;
}

/** A request as logged: pino's summary of it, with the values of its credential fields taken out. */
function requestSummary(req: Parameters<typeof pino.stdSerializers.req>[0]) {
  const summary = pino.stdSerializers.req(req);
  return { ...summary, headers: withoutCredentialFields(summary.headers) };
}

/** Where lines go: pino's destination (a SonicBoom), or any stream that takes text. */
export interface LogDestination {
  write(chunk: string): unknown;
  /** Writes what the destination still holds before the process exits (SonicBoom). */
  flushSync?(): void;
  /** Opens its file again, after logrotate has moved it (SonicBoom of a file). */
  reopen?(): void;
  /** Writes what it holds, then closes. */
  end?(): void;
}

/**
 * Bytes of lines that may wait for a slow stdout or log file; beyond them lines are dropped (and counted,
 * `quotagate_log_lines_dropped_total`) rather than held in memory without bound.
 */
export const maxWaitingLogBytes = 16 * 1_048_576;

/** A destination of log lines written asynchronously, bounded by `maxWaitingLogBytes`. */
export function logDestination(
  dest: number | string,
): pino.DestinationStream & ReturnType<typeof pino.destination> {
  return pino.destination({
    dest,
    sync: false,
    mkdir: typeof dest === 'string',
    maxLength: maxWaitingLogBytes,
  });
}

/** Where `logger` writes its lines. */
export function destinationOf(logger: Logger): LogDestination {
  return (logger as unknown as Record<symbol, LogDestination>)[pino.symbols.streamSym]!;
}

/**
 * Resolves once `logger`'s destination has no write running (SonicBoom writes asynchronously: its
 * `drain` comes when all it held is written), or after `timeoutMs` (stdout blocked). A worker thread that
 * exits drops a write still running, and the lines in it: the data-plane thread waits for this first.
 */
export async function logWritten(logger: Logger, timeoutMs: number): Promise<void> {
  // SonicBoom says whether a write is running only in its own field.
  const destination = destinationOf(logger) as LogDestination &
    Partial<EventEmitter> & { _writing?: boolean };
  if (destination._writing && destination.on)
    await beforeDeadline(once(destination as EventEmitter, 'drain'), timeoutMs);
  destination.flushSync?.();
}

/** The fields `logger` adds to every line after `time` (its base and bindings), as pino writes them. */
export function bindingsOf(logger: Logger): string {
  return (logger as unknown as Record<symbol, string>)[pino.symbols.chindingsSym] ?? '';
}

/** The root logger; every component takes a child of it. */
export function createLogger(settings: LoggerSettings = {}): Logger {
  const secrets = settings.secrets ?? new LogSecrets();
  const options: LoggerOptions = {
    level: settings.level ?? process.env.LOG_LEVEL ?? 'info',
    base: { service: 'quotagate' },
    redact: { paths: redactedPaths, censor: redactedText },
    serializers: {
      // Field names cannot protect an error's message: a plugin may quote the credential it refused.
      err: (error: Error) => redactError(pino.stdSerializers.err(error), secrets.remove),
      // An auth plugin is given this logger and may log the request, or its fields, as they came.
      req: requestSummary,
      headers: withoutCredentialFields,
    },
    // The config's secrets are taken out of every line, wherever a plugin or a message put them.
    hooks: { streamWrite: (line) => secrets.removeFromJson(line) },
  };
  if (settings.destination) return pino(options, settings.destination);
  if (process.stdout.isTTY) {
    return pino({
      ...options,
      transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l' } },
    });
  }
  return pino(options, logDestination(1));
}
