import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { runCli } from '../helpers/run-cli.js';
import {
  adminUser,
  petsConfig,
  startTestGateway,
  userAuth,
  writeSeedConfigDir,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { freePort } from '../support/free-port.js';

const headers = { authorization: userAuth(adminUser), 'content-type': 'application/json' };
const quota = JSON.stringify({ type: 'API', name: 'n', restrictions: [] });
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function gatewayWith(overrides: Record<string, unknown>): Promise<TestGateway> {
  const gateway = await startTestGateway(petsConfig('http://127.0.0.1:9', overrides));
  cleanups.push(() => gateway.close());
  return gateway;
}

describe('quota store failures', () => {
  it('answers a failed disk write with 500 and leaves file and definitions unchanged', async () => {
    const dir = writeSeedConfigDir({});
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'store', 'quotas.json');
    const gateway = await gatewayWith({ store: { type: 'memory', file } });
    const api = `${gateway.adminUrl}/api/portal/v1.3/quotas`;
    const before = readFileSync(file, 'utf8');
    mkdirSync(`${file}.tmp`);
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
    cleanups.push(() => redis.quit().then(() => undefined));
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
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'quotas.json');
    writeFileSync(file, '{"version": 1, "quotas": [{"id": ');
    rmSync(path.join(dir, 'default.js'));
    const configDir = writeSeedConfigDir(
      petsConfig('http://127.0.0.1:9', { store: { type: 'memory', file } }),
    );
    cleanups.push(() => rmSync(configDir, { recursive: true, force: true }));
    const result = await runCli(['start', '--config-dir', configDir]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      new RegExp(`^store\\.file: ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: not a quota file: `),
    );
    expect(readFileSync(file, 'utf8')).toBe('{"version": 1, "quotas": [{"id": ');
  });
});
