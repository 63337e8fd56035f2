import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observe/log.js';
import { Closers } from '../../src/runtime/closers.js';

/** The one stack of closers (src/runtime/closers.ts), built without a gateway. */
function capturedLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean))
        lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ level: 'info', destination }), lines };
}

describe('the closers of a process', () => {
  it('close in the reverse of the order the parts were built in, each after the one before has', async () => {
    const { logger } = capturedLogger();
    const closers = new Closers(logger);
    const order: string[] = [];
    for (const part of ['redis', 'stores', 'limiter', 'access log', 'upstream', 'gateway', 'admin'])
      closers.push(part, async () => {
        order.push(`${part} closing`);
        await new Promise((resolve) => setImmediate(resolve));
        order.push(`${part} closed`);
      });
    await closers.close();
    expect(order).toEqual(
      ['admin', 'gateway', 'upstream', 'access log', 'limiter', 'stores', 'redis'].flatMap((part) => [
        `${part} closing`,
        `${part} closed`,
      ]),
    );
  });

  it('close the rest when one fails, naming it in the log, and close once however often asked', async () => {
    const { logger, lines } = capturedLogger();
    const closers = new Closers(logger);
    const closed: string[] = [];
    closers.push('redis', () => closed.push('redis'));
    closers.push('upstream', () => Promise.reject(new Error('socket hang up')));
    closers.push('admin', () => closed.push('admin'));
    await Promise.all([closers.close(), closers.close()]);
    await closers.close();
    expect(closed).toEqual(['admin', 'redis']);
    expect(lines.filter((line) => line.msg === 'closing a part failed').map((line) => line.part)).toEqual([
      'upstream',
    ]);
  });

  it('refuse a part built once the process closes: it would never be closed', async () => {
    const closers = new Closers(capturedLogger().logger);
    await closers.close();
    expect(() => closers.push('late', () => undefined)).toThrow('late was built while the process closes');
  });
});
