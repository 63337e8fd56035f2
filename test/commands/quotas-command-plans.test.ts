import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import YAML from 'yaml';
import { runCli } from '../helpers/run-cli.js';
import { useTempDirs } from '../helpers/temp-dirs.js';
import { petsConfig, throttle, writeSeedConfigDir } from '../helpers/test-gateway.js';

/**
 * Plans through `gateway quotas export` and `import` (the real CLI): a membership is exported as its
 * id, application and plan, and imported after the plan it names, whatever the order of the file.
 */
const mobile = {
  id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f',
  name: 'Mobile app',
  apikey_development: 'app-key-0123456789abcdef0123456789',
};
const goldId = '6c0b4f2e-1d3a-4b5c-9e8f-7a6b5c4d3e2f';
const membership = { id: '9e8d7c6b-5a49-4838-9726-150413029181', application: mobile.id, plan: goldId };
const gold = {
  id: goldId,
  type: 'APPLICATION',
  name: 'Gold',
  description: '',
  restrictions: [{ ...throttle(10, 1, 'hour'), config: { messages: '10', per: '1', period: 'hour' } }],
};

const temp = useTempDirs('quotagate-plans-');
const quotas = (dir: string, ...args: string[]) => runCli(['quotas', ...args, '--config-dir', dir]);

/** A config folder of Mobile and the pets API on `store`, removed after the suite. */
function configDir(store: Record<string, unknown>): string {
  const dir = writeSeedConfigDir(petsConfig('http://127.0.0.1:9/pets', { applications: [mobile], store }));
  temp.removeAfter(dir);
  return dir;
}

describe.each([
  ['the memory store', () => ({})],
  ['the Redis store', () => ({ type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` })],
])('gateway quotas with plans on %s', (_name, store) => {
  it('imports a membership before its plan in the file, exports both, and refuses a membership of no plan', async () => {
    const dir = configDir(store());
    const file = path.join(temp.make(), 'plans.yaml');
    writeFileSync(file, YAML.stringify({ quotas: [membership, gold] }));
    const imported = await quotas(dir, 'import', file);
    expect(imported.stderr).not.toMatch(/^gateway quotas: (error|fatal):/m);
    expect(imported.code).toBe(0);

    const exported = JSON.parse((await quotas(dir, 'export', '--format', 'json')).stdout) as {
      quotas: Array<Record<string, unknown>>;
    };
    expect(exported.quotas.filter((quota) => quota.id === goldId || quota.id === membership.id)).toEqual([
      gold,
      membership,
    ]);

    const orphan = path.join(temp.make(), 'orphan.yaml');
    writeFileSync(
      orphan,
      YAML.stringify([{ ...membership, id: randomUUID(), application: 'project', plan: randomUUID() }]),
    );
    const refused = await quotas(dir, 'import', orphan);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/plan: no quota with id/);
  });

  it('imports, as its dry run said, a file that moves an application off a plan and retypes that plan', async () => {
    const dir = configDir(store());
    const silver = { ...gold, id: randomUUID(), name: 'Silver' };
    const before = path.join(temp.make(), 'before.yaml');
    writeFileSync(before, YAML.stringify({ quotas: [gold, silver, membership] }));
    expect((await quotas(dir, 'import', before)).code).toBe(0);

    const goldAsApi = { ...gold, type: 'API', name: 'Gold, now for all traffic' };
    const moved = { ...membership, plan: silver.id };
    const after = path.join(temp.make(), 'after.yaml');
    writeFileSync(after, YAML.stringify({ quotas: [goldAsApi, moved] }));
    const dry = await quotas(dir, 'import', after, '--dry-run');
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('dry run: nothing written; 0 to create, 2 to replace, 0 unchanged');

    const imported = await quotas(dir, 'import', after);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.stdout).toContain('0 to create, 2 to replace, 0 unchanged');
    const exported = JSON.parse((await quotas(dir, 'export', '--format', 'json')).stdout) as {
      quotas: Array<Record<string, unknown>>;
    };
    expect(exported.quotas).toEqual(expect.arrayContaining([goldAsApi, moved]));
  });

  it('refuses in its dry run and its import alike a file that retypes a plan an application stays on, and writes none of it', async () => {
    const dir = configDir(store());
    const before = path.join(temp.make(), 'before.yaml');
    writeFileSync(before, YAML.stringify({ quotas: [gold, membership] }));
    expect((await quotas(dir, 'import', before)).code).toBe(0);
    const stored = (await quotas(dir, 'export')).stdout;

    const extra = { ...gold, id: randomUUID(), type: 'API', name: 'New' };
    const file = path.join(temp.make(), 'retype.yaml');
    writeFileSync(file, YAML.stringify({ quotas: [extra, { ...gold, type: 'API' }] }));
    for (const args of [['--dry-run'], []]) {
      const refused = await quotas(dir, 'import', file, ...args);
      expect(refused.code, args.join(' ')).toBe(2);
      expect(refused.stderr).toContain(
        `${file}: quota '${goldId}' is a plan that 1 application is on ('${mobile.id}')`,
      );
    }
    expect((await quotas(dir, 'export')).stdout).toBe(stored);
  });
});
