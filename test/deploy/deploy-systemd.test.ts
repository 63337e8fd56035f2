import { readFileSync } from 'node:fs';
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

  it('has deploy/README.md rotate the keys of conf/ with that reload, not with a restart', () => {
    const readme = readFileSync('deploy/README.md', 'utf8');
    const rotation = readme.slice(readme.indexOf('## Keys and their rotation'));
    const step = /^- \*\*systemd\*\*: [\s\S]*?(?=\n\n|\n- |$)/m.exec(rotation)?.[0] ?? '';
    expect(step).toMatch(/edit `conf\/production\.js`, then `systemctl reload quotagate`/);
    expect(step).not.toMatch(/conf\/production\.js`, then `systemctl restart/);
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
