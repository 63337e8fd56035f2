import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { runCli } from '../helpers/run-cli.js';
import {
  adminUser,
  memberUser,
  petsConfig,
  startTestGateway,
  userAuth,
  writeSeedConfigDir,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { freePort } from '../helpers/free-port.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

const headers = { authorization: userAuth(adminUser), 'content-type': 'application/json' };
const quota = JSON.stringify({ type: 'API', name: 'n', restrictions: [] });
const defer = cleanupAfterEach();

async function gatewayWith(overrides: Record<string, unknown>): Promise<TestGateway> {
  const gateway = await startTestGateway(petsConfig('http://127.0.0.1:9', overrides));
  defer(() => gateway.close());
  return gateway;
}

describe('quota store failures', () => {
  it('answers a failed disk write with 500 and leaves file and definitions unchanged', async () => {
    const dir = writeSeedConfigDir({});
    defer(() => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'store', 'quotas.json');
    const gateway = await gatewayWith({ store: { type: 'memory', file } });
    const api = `${gateway.adminUrl}/api/portal/v1.3/quotas`;
    const before = readFileSync(file, 'utf8');
    // A folder where the (per-process) temporary file must go fails the write, as a full disk would.
    mkdirSync(`${file}.${process.pid}.tmp`);
    const res = await fetch(api, { method: 'POST', headers, body: quota });
    expect(res.status).toBe(500);
    expect(((await res.json()) as { errors: Array<{ message: string }> }).errors[0]!.message).toMatch(
      /^cannot write quota definitions \(EISDIR\); nothing was changed$/,
    );
    expect(readFileSync(file, 'utf8')).toBe(before);
    expect(((await (await fetch(api, { headers })).json()) as unknown[]).length).toBe(2);
  });

  it('answers writes with 503 while Redis is unreachable, and still serves the well-known quotas', async () => {
    const gateway = await gatewayWith({
      store: { type: 'redis', url: `redis://127.0.0.1:${await freePort()}` },
    });
    const api = `${gateway.adminUrl}/api/portal/v1.3/quotas`;
    expect((await fetch(api, { method: 'POST', headers, body: quota })).status).toBe(503);
    expect(((await (await fetch(api, { headers })).json()) as unknown[]).length).toBe(2);
  });

  it('warns at start when Redis keeps nothing on disk', async () => {
    const redis = new Redis(inject('redisUrl'));
    defer(() => redis.quit().then(() => undefined));
    const [, appendonly] = (await redis.config('GET', 'appendonly')) as [string, string];
    const [, save] = (await redis.config('GET', 'save')) as [string, string];
    const gateway = await gatewayWith({
      store: { type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` },
    });
    const warned = gateway.logs.some((line) => String(line.msg).startsWith('redis persistence is off'));
    expect(warned).toBe(appendonly !== 'yes' && save === '');
  });

  it('refuses to start on a corrupt quota file (exit 2) and leaves the file as it was', async () => {
    const dir = writeSeedConfigDir({});
    defer(() => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'quotas.json');
    writeFileSync(file, '{"version": 1, "quotas": [{"id": ');
    rmSync(path.join(dir, 'default.js'));
    const configDir = writeSeedConfigDir(
      petsConfig('http://127.0.0.1:9', { store: { type: 'memory', file } }),
    );
    defer(() => rmSync(configDir, { recursive: true, force: true }));
    const result = await runCli(['start', '--config-dir', configDir]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      new RegExp(`^store\\.file: ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: not a quota file: `),
    );
    expect(readFileSync(file, 'utf8')).toBe('{"version": 1, "quotas": [{"id": ');
  });

  it('refuses to start on a quota file holding a record the quota schema refuses, naming it, and leaves the file as it was', async () => {
    const dir = writeSeedConfigDir({});
    defer(() => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'quotas.json');
    const id = randomUUID();
    const text = JSON.stringify({
      version: 1,
      quotas: [
        {
          id,
          type: 'API',
          name: 'tiny',
          description: '',
          restrictions: [
            { api: '*', method: '*', type: 'throttlemb', config: { mb: '1e-7', per: '1', period: 'day' } },
          ],
          system: false,
        },
      ],
    });
    writeFileSync(file, text);
    const failure = await gatewayWith({ store: { type: 'memory', file } }).catch((error: unknown) => error);
    expect((failure as Error).message).toBe(
      `store.file: ${file}: not a quota file: quotas[0] (id '${id}'): restrictions[0].config.mb: ` +
        'must be a number of megabytes from 0.000001 to 953674316.406249, with at most 6 decimals ' +
        '(nothing was changed; fix or remove these records, or restore the file from a backup)',
    );
    expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it('shows an admin the definitions in Redis that the quota schema refuses, and lets the admin fix or delete them', async () => {
    const prefix = `test:${randomUUID()}:`;
    const redis = new Redis(inject('redisUrl'));
    defer(() => redis.quit().then(() => undefined));
    const mobileAppId = '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
    const definition = (id: string, type: string, mb: string) => ({
      id,
      type,
      name: `stored ${mb}`,
      description: '',
      restrictions: [{ api: '*', method: '*', type: 'throttlemb', config: { mb, per: '1', period: 'day' } }],
      system: false,
    });
    const [tinyId, ownId, systemId] = [randomUUID(), randomUUID(), '00000000-0000-0000-0000-000000000000'];
    const stored = {
      [tinyId]: JSON.stringify(definition(tinyId, 'API', '1e-7')),
      [ownId]: JSON.stringify({ ...definition(ownId, 'APPLICATION', '953674317'), application: mobileAppId }),
      [systemId]: JSON.stringify({ ...definition(systemId, 'API', '1e-7'), name: 'System', system: true }),
    };
    await redis.hset(`${prefix}{quotas}:definitions`, stored);
    await redis.hset(`${prefix}{quotas}:applications`, { [mobileAppId]: ownId });
    const gateway = await gatewayWith({
      store: { type: 'redis', url: inject('redisUrl'), prefix },
      applications: [
        { id: mobileAppId, name: 'Mobile', apikey_development: 'mobile-dev-key-0123456789abcdef' },
      ],
    });
    const api = `${gateway.adminUrl}/api/portal/v1.3`;
    const mb = 'must be a number of megabytes from 0.000001 to 953674316.406249, with at most 6 decimals';

    const listed = await fetch(`${api}/refused-quotas`, { headers });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as Array<{ id: string }>).sort((a, b) => a.id.localeCompare(b.id))).toEqual(
      [
        { id: tinyId, problems: [`restrictions[0].config.mb: ${mb}`], stored: stored[tinyId] },
        {
          id: ownId,
          application: mobileAppId,
          problems: [`restrictions[0].config.mb: ${mb}`],
          stored: stored[ownId],
        },
        { id: systemId, problems: [`restrictions[0].config.mb: ${mb}`], stored: stored[systemId] },
      ].sort((a, b) => a.id.localeCompare(b.id)),
    );
    const asMember = { authorization: userAuth(memberUser) };
    expect((await fetch(`${api}/refused-quotas`, { headers: asMember })).status).toBe(403);
    expect((await fetch(`${api}/refused-quotas`)).status).toBe(401);
    const ids = ((await (await fetch(`${api}/quotas`, { headers })).json()) as Array<{ id: string }>).map(
      (q) => q.id,
    );
    expect(ids).not.toContain(tinyId);
    expect(ids).not.toContain(ownId);

    const read = await fetch(`${api}/quotas/${tinyId}`, { headers });
    expect(read.status).toBe(500);
    expect(read.headers.get('etag')).toMatch(/^"[0-9a-f]{40}"$/);
    expect(await read.json()).toEqual({
      errors: [
        {
          code: 500,
          message: `quota '${tinyId}' is stored in a form this gateway refuses (restrictions[0].config.mb: ${mb}); PUT a valid quota to replace it, or DELETE it`,
        },
      ],
    });

    const valid = JSON.stringify({
      type: 'API',
      name: 'fixed',
      restrictions: [
        { api: '*', method: '*', type: 'throttlemb', config: { mb: '0.000001', per: '1', period: 'day' } },
      ],
    });
    const fixed = await fetch(`${api}/quotas/${tinyId}`, { method: 'PUT', headers, body: valid });
    expect(fixed.status).toBe(200);
    expect(await (await fetch(`${api}/quotas/${tinyId}`, { headers })).json()).toMatchObject({
      name: 'fixed',
      system: false,
    });

    const system = await fetch(`${api}/quotas/${systemId}`, {
      method: 'PUT',
      headers,
      body: valid.replace('fixed', 'System'),
    });
    expect(system.status).toBe(200);
    expect(await system.json()).toMatchObject({ id: systemId, name: 'System', system: true });

    expect((await fetch(`${api}/applications/${mobileAppId}/quota`, { headers })).status).toBe(500);
    const deleted = await fetch(`${api}/applications/${mobileAppId}/quota`, { method: 'DELETE', headers });
    expect(deleted.status).toBe(204);
    expect(await (await fetch(`${api}/refused-quotas`, { headers })).json()).toEqual([]);
    const own = await fetch(`${api}/applications/${mobileAppId}/quota`, {
      method: 'POST',
      headers,
      body: valid.replace('"API"', '"APPLICATION"'),
    });
    expect(own.status).toBe(201);
  });
});
