import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { tracingSchema } from '../../src/config/tracing-schema.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { createLogger, LogSecrets } from '../../src/observe/log.js';
import { Closers } from '../../src/runtime/closers.js';
import { envOf } from '../../src/runtime/env.js';
import { openTracing } from '../../src/runtime/tracing.js';
import { freePort } from '../helpers/free-port.js';

/**
 * What a tracing backend is told to let spans in (an API key in a field of every export, in the
 * endpoint's user or query) is a secret like the config's keys: the log never writes it, wherever it
 * came from, the config or the OTEL_* variables.
 */
describe("the tracing backend's credentials", () => {
  it('are kept out of the log, from the config and from OTEL_EXPORTER_OTLP_HEADERS', async () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const secrets = new LogSecrets();
    const logger = createLogger({ level: 'debug', destination, secrets });
    const env = envOf({
      logger,
      secrets,
      environment: { OTEL_EXPORTER_OTLP_HEADERS: 'x-env-team=env-team-credential-0123456789' },
    });
    const closers = new Closers(logger);
    const endpoint = `http://otlp-user:endpoint-password-0123456789@127.0.0.1:${await freePort()}/v1/traces?api_key=endpoint-query-key-0123456789`;
    const tracing = await openTracing(
      tracingSchema.parse({
        enabled: true,
        endpoint,
        headers: { 'x-honeycomb-team': 'config-team-credential-0123456789' },
        scheduledDelay: 1,
      }),
      () => 1_000,
      env,
      createMetrics(),
      closers,
    );
    tracing!.start({}, 'GET').span.end();
    await tracing!.close(1_000);
    const credentials = [
      'env-team-credential-0123456789',
      'config-team-credential-0123456789',
      'endpoint-password-0123456789',
      'endpoint-query-key-0123456789',
    ];
    logger.warn(`the credentials themselves: ${credentials.join(' ')}`);
    const log = lines.join('');
    expect(log).toContain('tracing on');
    expect(log).toContain('the credentials themselves');
    for (const credential of credentials) expect(log).not.toContain(credential);
  });
});
