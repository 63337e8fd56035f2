import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/observe/log.js';

/** A logger whose lines a test can read back, parsed. */
export function capturingLogger(): { lines: Array<Record<string, unknown>>; logger: Logger } {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: createLogger({ level: 'debug', destination }) };
}
