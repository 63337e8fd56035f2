import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { redactError, redactedText, valueRemover, withoutCredentialFields } from './secret-redaction.js';

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

export interface LoggerSettings {
  level?: string;
  /** Where lines go; when absent, stdout (pretty-printed only when stdout is a terminal). */
  destination?: DestinationStream;
  /** Values never to write, wherever a line holds them (keys and passwords of the config). */
  secrets?: readonly string[];
}

/** A request as logged: pino's summary of it, with the values of its credential fields taken out. */
function requestSummary(req: Parameters<typeof pino.stdSerializers.req>[0]) {
  const summary = pino.stdSerializers.req(req);
  return { ...summary, headers: withoutCredentialFields(summary.headers) };
}

/** The root logger; every component takes a child of it. */
export function createLogger(settings: LoggerSettings = {}): Logger {
  const secrets = settings.secrets ?? [];
  const withoutSecrets = valueRemover(secrets);
  // As they appear inside a JSON line: quotes and backslashes escaped.
  const withoutSecretsInJson = valueRemover(secrets.map((secret) => JSON.stringify(secret).slice(1, -1)));
  const options: LoggerOptions = {
    level: settings.level ?? process.env.LOG_LEVEL ?? 'info',
    base: { service: 'quotagate' },
    redact: { paths: redactedPaths, censor: redactedText },
    serializers: {
      // Field names cannot protect an error's message: a plugin may quote the credential it refused.
      err: (error: Error) => redactError(pino.stdSerializers.err(error), withoutSecrets),
      // An auth plugin is given this logger and may log the request, or its fields, as they came.
      req: requestSummary,
      headers: withoutCredentialFields,
    },
    // The config's secrets are taken out of every line, wherever a plugin or a message put them.
    ...(secrets.length > 0 ? { hooks: { streamWrite: withoutSecretsInJson } } : {}),
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
