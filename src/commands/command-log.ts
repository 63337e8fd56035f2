import { Writable } from 'node:stream';
import { createLogger, type LogSecrets, type Logger } from '../observe/log.js';

const levelNames: Readonly<Record<number, string>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warning',
  50: 'error',
  60: 'fatal',
};

/** Fields of every line that a person reading a command's output has no use for. */
const unsaid = new Set(['level', 'time', 'service', 'component', 'msg', 'pid', 'hostname']);

/**
 * The logger of a command whose standard output is its answer (an export, a report): warnings and
 * errors go to standard error as sentences (`gateway quotas: warning: <message> (field: value)`), never
 * among the answer and never as JSON lines.
 */
export function commandLogger(command: string, secrets?: LogSecrets): Logger {
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n'))
        if (line !== '') process.stderr.write(`gateway ${command}: ${sentenceOf(line)}\n`);
      done();
    },
  });
  return createLogger({ level: 'warn', destination, ...(secrets ? { secrets } : {}) });
}

/** A JSON log line as one line of text: its level, its message, then its other fields. */
function sentenceOf(line: string): string {
  const fields = JSON.parse(line) as Record<string, unknown>;
  const details = Object.entries(fields)
    .filter(([name]) => !unsaid.has(name))
    .map(([name, value]) => `${name}: ${textOf(value)}`);
  const level = levelNames[fields.level as number] ?? String(fields.level);
  return `${level}: ${String(fields.msg ?? '')}${details.length > 0 ? ` (${details.join(', ')})` : ''}`;
}

function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(textOf).join('; ');
  const message = (value as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : JSON.stringify(value);
}
