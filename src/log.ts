import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { redactError, redactedText } from './secret-redaction.js';

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

export interface LoggerSettings {
  level?: string;
  /** Where lines go; when absent, stdout (pretty-printed only when stdout is a terminal). */
  destination?: DestinationStream;
  /** Values never to write, wherever an error's text quotes them (keys and passwords of the config). */
  secrets?: readonly string[];
}

/** The root logger; every component takes a child of it. */
export function createLogger(settings: LoggerSettings = {}): Logger {
  const secrets = settings.secrets ?? [];
  const options: LoggerOptions = {
    level: settings.level ?? process.env.LOG_LEVEL ?? 'info',
    base: { service: 'quotagate' },
    redact: { paths: redactedPaths, censor: redactedText },
    // Field names cannot protect an error's message: a plugin may quote the credential it refused.
    serializers: { err: (error: Error) => redactError(pino.stdSerializers.err(error), secrets) },
  };
  if (settings.destination) return pino(options, settings.destination);
  if (process.stdout.isTTY) {
    return pino({
      ...options,
      transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l' } },
    });
  }
  return pino(options);
}
