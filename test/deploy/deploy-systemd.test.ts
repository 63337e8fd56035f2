import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { timeSpanMs, unit, unitValue } from '../helpers/deploy-files.js';

describe('deploy/systemd/quotagate.service', () => {
  it('gives the gateway longer to stop after SIGTERM than the default shutdownTimeout', () => {
    expect(unitValue('KillSignal')).toBe('SIGTERM');
    expect(timeSpanMs(unitValue('TimeoutStopSec')!)).toBeGreaterThan(configSchema.parse({}).shutdownTimeout);
  });

  it('runs node on dist/cli.js start as its own user in production, restarting only on failure', () => {
    expect(unitValue('ExecStart')).toBe('/usr/bin/node dist/cli.js start');
    expect(unitValue('User')).toMatch(/^(?!root$)\w+/);
    expect(unit.get('Environment')).toContain('NODE_ENV=production');
    expect(unitValue('Restart')).toBe('on-failure');
  });

  it('reloads the config on systemctl reload with the SIGHUP the gateway reloads on', () => {
    expect(unitValue('ExecReload')).toBe('/bin/kill -HUP $MAINPID');
  });

  it("lets the gateway write only the memory store's folder", () => {
    expect(unitValue('NoNewPrivileges')).toBe('yes');
    expect(unitValue('ProtectSystem')).toBe('strict');
    const storeFolder = path.posix.dirname(configSchema.parse({}).store.file);
    expect(unit.get('ReadWritePaths')).toEqual([
      path.posix.join(unitValue('WorkingDirectory')!, storeFolder),
    ]);
  });
});
