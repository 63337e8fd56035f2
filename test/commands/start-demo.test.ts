import { once } from 'node:events';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { spawnCli } from '../helpers/run-cli.js';

/** `gateway start --demo` with the shipped conf/, as the README's quick start runs it, in a process of its own. */
describe('gateway start --demo', () => {
  it('names DEMO_UPSTREAM_PORT when the demo upstream cannot have its port, and exits 1 without a stack trace', async () => {
    const holder = createServer().listen(0, '127.0.0.1');
    await once(holder, 'listening');
    const taken = (holder.address() as AddressInfo).port;
    try {
      const cli = spawnCli(['start', '--demo'], {
        env: { PORT: '0', ADMIN_PORT: '0', DEMO_UPSTREAM_PORT: String(taken) },
      });
      const result = await cli.exited;
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(
        `gateway start: the demo upstream's port ${taken} (where apis[0].upstream points) is in use (EADDRINUSE): set DEMO_UPSTREAM_PORT (the shipped conf/default.js reads it) or apis[0].upstream to another\n`,
      );
      expect(result.stdout).not.toContain('"msg":"gateway started"');
    } finally {
      holder.close();
    }
  }, 30_000);
});
