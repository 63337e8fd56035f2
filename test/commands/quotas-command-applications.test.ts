import { createHash, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import YAML from 'yaml';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { request } from '../helpers/raw-http.js';
import { runCli } from '../helpers/run-cli.js';
import { useTempDirs } from '../helpers/temp-dirs.js';
import {
  adminCall,
  basicAuth,
  petsConfig,
  startTestGateway,
  throttle,
  writeSeedConfigDir,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * `gateway quotas export` and `import` move the applications made through the admin API (with the
 * digests of their keys) together with the quotas: what a memory store holds arrives whole in Redis.
 */
const temp = useTempDirs('quotagate-move-');
const defer = cleanupAfterEach();
const quotas = (dir: string, ...args: string[]) => runCli(['quotas', ...args, '--config-dir', dir]);

let upstream: TestUpstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(() => upstream.close());

/** An application made through the admin API, with a key: its id and the key, as the API answered. */
async function madeApplication(gateway: TestGateway, name: string): Promise<{ id: string; key: string }> {
  const made = await adminCall(gateway, 'POST', '/applications', { name });
  expect(made.status).toBe(201);
  const { id } = (await made.json()) as { id: string };
  const key = await adminCall(gateway, 'POST', `/applications/${id}/apikeys`, {});
  expect(key.status).toBe(201);
  return { id, key: ((await key.json()) as { key: string }).key };
}

const statusesOf = async (gateway: TestGateway, key: string, times: number) => {
  const statuses: number[] = [];
  for (let i = 0; i < times; i += 1)
    statuses.push(
      (await request(gateway.url, { path: '/pets/1', headers: { authorization: basicAuth(key) } })).status,
    );
  return statuses;
};

describe('moving a memory store with applications made through the admin API to Redis', () => {
  it('moves them with their keys hashed: after one export and one import their keys are admitted and their quotas count', async () => {
    const file = path.join(temp.make(), 'quotas.json');
    const memory = petsConfig(`${upstream.url}/pets`, { store: { type: 'memory', file } });
    const before = await startTestGateway(memory);
    const partner = await madeApplication(before, 'Partner portal');
    const reseller = await madeApplication(before, 'Reseller');
    const own = await adminCall(before, 'PUT', `/applications/${partner.id}/quota`, {
      restrictions: [throttle(2, 1, 'minute')],
    });
    expect(own.status).toBe(201);
    const plan = await adminCall(before, 'POST', '/quotas', {
      type: 'APPLICATION',
      name: 'Bronze',
      restrictions: [throttle(1, 1, 'minute')],
    });
    const bronze = ((await plan.json()) as { id: string }).id;
    expect(
      (await adminCall(before, 'PUT', `/applications/${reseller.id}/quota`, { plan: bronze })).status,
    ).toBe(200);
    await before.close();

    const store = { type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:`, file };
    const dir = writeSeedConfigDir(petsConfig(`${upstream.url}/pets`, { store }));
    temp.removeAfter(dir);
    const exported = await quotas(dir, 'export', '--from-file', file);
    expect(exported.code, exported.stderr).toBe(0);
    for (const { key } of [partner, reseller]) {
      expect(exported.stdout).not.toContain(key);
      expect(exported.stdout).toContain(createHash('sha256').update(key).digest('hex'));
    }
    const moved = path.join(temp.make(), 'moved.yaml');
    writeFileSync(moved, exported.stdout);
    const imported = await quotas(dir, 'import', moved);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.stdout).toContain(`created application ${partner.id} Partner portal`);
    expect(imported.stdout).toContain('2 applications to create, 0 to replace, 0 unchanged');

    const after = await startTestGateway(petsConfig(`${upstream.url}/pets`, { store }));
    defer(() => after.close());
    expect(await statusesOf(after, partner.key, 3)).toEqual([200, 200, 429]);
    expect(await statusesOf(after, reseller.key, 2)).toEqual([200, 429]);

    const again = await quotas(dir, 'import', moved);
    expect(again.stdout).toContain('0 applications to create, 0 to replace, 2 unchanged');
  });

  it('refuses an application of the file that breaks the stored form (a plain key), and writes nothing', async () => {
    const store = { type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` };
    const dir = writeSeedConfigDir(petsConfig(`${upstream.url}/pets`, { store }));
    temp.removeAfter(dir);
    const before = (await quotas(dir, 'export')).stdout;
    const application = {
      id: randomUUID(),
      name: 'Leaky',
      description: '',
      enabled: true,
      createdOn: 0,
      keys: [
        { id: randomUUID(), key: 'a-plain-key', environment: 'development', enabled: true, createdOn: 0 },
      ],
    };
    const file = path.join(temp.make(), 'leaky.yaml');
    writeFileSync(file, YAML.stringify({ quotas: [], applications: [application] }));
    const refused = await quotas(dir, 'import', file);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`${file}: applications[0].keys[0].digest: must be a hex SHA-256 digest`);
    expect(refused.stderr).not.toContain('a-plain-key');
    expect((await quotas(dir, 'export')).stdout).toBe(before);
  });
});
