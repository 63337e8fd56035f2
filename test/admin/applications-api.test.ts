import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import {
  adminUser,
  basicAuth,
  memberUser,
  petsConfig,
  startTestGateway,
  throttle,
  userAuth,
  type TestGateway,
  accessLines,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * Applications and their API keys made through the portal API: a key is generated, shown once, kept as
 * a digest, opens requests at once and stops at once when revoked, on every gateway of a Redis fleet
 * within a second. Real gateways on 127.0.0.1, a real Redis.
 */
const declared = {
  id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f',
  name: 'Mobile app',
  apikey_development: 'app-key-0123456789abcdef0123456789',
};

const defer = cleanupAfterEach();

async function start(store: Record<string, unknown> = {}): Promise<TestGateway> {
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, { applications: [declared], ...(store.type ? { store } : {}) }),
  );
  defer(() => gateway.close());
  return gateway;
}

async function admin(
  gateway: TestGateway,
  method: string,
  target: string,
  body?: unknown,
  user: { username: string; password: string } = adminUser,
): Promise<{
  status: number;
  body: Record<string, unknown> & Array<Record<string, unknown>>;
  location: string | null;
}> {
  const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3${target}`, {
    method,
    headers: {
      authorization: userAuth(user),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {}, location: res.headers.get('location') };
}

const get = (gateway: TestGateway, key: string) =>
  fetch(`${gateway.url}/pets/1`, { headers: { authorization: basicAuth(key) } }).then((res) => res.status);

async function appWithKey(gateway: TestGateway): Promise<{ id: string; keyId: string; key: string }> {
  const app = await admin(gateway, 'POST', '/applications', {
    name: 'Partner portal',
    email: 'ignored@example.org',
  });
  expect(app.status).toBe(201);
  const id = app.body.id as string;
  expect(app.location).toBe(`/api/portal/v1.3/applications/${id}`);
  const key = await admin(gateway, 'POST', `/applications/${id}/apikeys`, {});
  expect(key.status).toBe(201);
  return { id, keyId: key.body.id as string, key: key.body.key as string };
}

describe('applications and keys through the portal API', () => {
  it('generates a key shown once that opens requests at once; disabled or revoked, it stops at once', async () => {
    const gateway = await start();
    const { id, keyId, key } = await appWithKey(gateway);
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await get(gateway, key)).toBe(200);
    expect(accessLines(gateway).at(-1)).toMatchObject({
      application: 'Partner portal',
      subject: id,
    });

    const listed = await admin(gateway, 'GET', `/applications/${id}/apikeys`);
    expect(listed.body).toEqual([
      {
        id: keyId,
        applicationId: id,
        environment: 'development',
        enabled: true,
        createdOn: expect.any(Number),
      },
    ]);
    expect(JSON.stringify(listed.body)).not.toContain(key);

    expect(
      (await admin(gateway, 'PUT', `/applications/${id}/apikeys/${keyId}`, { enabled: false })).status,
    ).toBe(200);
    expect(await get(gateway, key)).toBe(401);
    expect(
      (await admin(gateway, 'PUT', `/applications/${id}/apikeys/${keyId}`, { enabled: true })).status,
    ).toBe(200);
    expect(await get(gateway, key)).toBe(200);
    expect(
      (await admin(gateway, 'PUT', `/applications/${id}`, { name: 'Partner portal', enabled: false })).status,
    ).toBe(200);
    expect(await get(gateway, key)).toBe(401);
    expect(
      (await admin(gateway, 'PUT', `/applications/${id}`, { name: 'Partners', enabled: true })).status,
    ).toBe(200);
    expect(await get(gateway, key)).toBe(200);
    expect((await admin(gateway, 'DELETE', `/applications/${id}/apikeys/${keyId}`)).status).toBe(204);
    expect(await get(gateway, key)).toBe(401);
    expect(gateway.rawLogs()).not.toContain(key);
  });

  it('refuses a revoked key on the keep-alive connection it was admitted on', async () => {
    const gateway = await start();
    const { id, keyId, key } = await appWithKey(gateway);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const send = () =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        const req = http.get(
          `${gateway.url}/pets/1`,
          { agent, headers: { authorization: basicAuth(key) } },
          (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
          },
        );
        req.on('error', reject);
      });
    try {
      expect(await send()).toEqual({ status: 200, reused: false });
      expect(await send()).toEqual({ status: 200, reused: true });
      expect((await admin(gateway, 'DELETE', `/applications/${id}/apikeys/${keyId}`)).status).toBe(204);
      expect(await send()).toEqual({ status: 401, reused: true });
    } finally {
      agent.destroy();
    }
  });

  it('keeps keys as digests at rest, in the memory store’s applications file', async () => {
    const gateway = await start();
    const { key } = await appWithKey(gateway);
    const file = path.join(gateway.configDir, 'applications.json');
    const text = readFileSync(file, 'utf8');
    expect(text).not.toContain(key);
    expect(text).toMatch(/"digest": "[0-9a-f]{64}"/);
  });

  it('lists the applications of conf/ (read-only) with those made here, and members may only read', async () => {
    const gateway = await start();
    const { id } = await appWithKey(gateway);
    const list = await admin(gateway, 'GET', '/applications', undefined, memberUser);
    expect(list.body.map((application) => [application.name, application.declared])).toEqual([
      ['project', true],
      ['Mobile app', true],
      ['Partner portal', false],
    ]);
    expect((await admin(gateway, 'POST', '/applications', { name: 'x' }, memberUser)).status).toBe(403);
    for (const [method, target, body] of [
      ['PUT', `/applications/${declared.id}`, { name: 'renamed' }],
      ['DELETE', `/applications/${declared.id}`, undefined],
      ['POST', `/applications/${declared.id}/apikeys`, {}],
    ] as const) {
      const refused = await admin(gateway, method, target, body);
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({
        errors: [expect.objectContaining({ message: expect.stringContaining('is declared in conf/') })],
      });
    }
    expect((await admin(gateway, 'GET', `/applications/${id}`)).body).toMatchObject({
      name: 'Partner portal',
    });
    const bad = await admin(gateway, 'POST', '/applications', { name: '', enabled: 'yes' });
    expect(bad.status).toBe(400);
    expect((bad.body as unknown as { errors: unknown[] }).errors).toHaveLength(2);
  });

  it('gives an application made here a quota of its own, and deleting it takes keys and quota along', async () => {
    const gateway = await start();
    const { id, key } = await appWithKey(gateway);
    const quota = await admin(gateway, 'POST', `/applications/${id}/quota`, {
      restrictions: [throttle(1, 1, 'hour')],
    });
    expect(quota.status).toBe(201);
    expect(quota.body).toMatchObject({
      name: 'Partner portal quota',
      application: { id, name: 'Partner portal' },
    });
    expect(await get(gateway, key)).toBe(200);
    expect(await get(gateway, key)).toBe(429);
    expect((await admin(gateway, 'DELETE', `/applications/${id}`)).status).toBe(204);
    expect(await get(gateway, key)).toBe(401);
    expect((await admin(gateway, 'GET', `/quotas/${quota.body.id as string}`)).status).toBe(404);
  });
});

describe('applications made here and those of conf/', () => {
  it('refuse a reload that gives a conf/ application the id of one made through the API', async () => {
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const config = petsConfig(`${upstream.url}/pets`, { applications: [declared] });
    const gateway = await startTestGateway(config);
    defer(() => gateway.close());
    const { id } = await appWithKey(gateway);
    const clash = { id, name: 'Clash', apikey_development: 'clash-key-0123456789abcdef0123456' };
    const outcome = await gateway.reloadWith({ ...config, applications: [declared, clash] });
    expect(outcome).toEqual({
      applied: false,
      problems: [
        "applications[1].id: the application 'Partner portal' made through the admin API has this id; delete it there, or give this one another id",
      ],
    });
  });

  it('take names people can read: no control characters', async () => {
    const gateway = await start();
    const bad = await admin(gateway, 'POST', '/applications', { name: 'line\nbreak' });
    expect(bad.status).toBe(400);
  });
});

describe('applications on a Redis fleet', () => {
  it('take many keys made at once for one application, none lost and none refused', async () => {
    const store = { type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` };
    const gateway = await start(store);
    const made = await admin(gateway, 'POST', '/applications', { name: 'Busy' });
    const id = made.body.id as string;
    const statuses = await Promise.all(
      Array.from({ length: 30 }, () =>
        admin(gateway, 'POST', `/applications/${id}/apikeys`, {}).then((res) => res.status),
      ),
    );
    expect(statuses.filter((status) => status !== 201)).toEqual([]);
    expect((await admin(gateway, 'GET', `/applications/${id}/apikeys`)).body).toHaveLength(30);
  });

  it('an application and key made on one gateway authenticate on another within a second', async () => {
    const store = { type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` };
    const [first, second] = [await start(store), await start(store)];
    const { id, keyId, key } = await appWithKey(first);
    await expect.poll(() => get(second, key), { timeout: 1_000, interval: 25 }).toBe(200);
    expect((await admin(second, 'GET', `/applications/${id}`)).body).toMatchObject({
      name: 'Partner portal',
    });
    expect((await admin(first, 'DELETE', `/applications/${id}/apikeys/${keyId}`)).status).toBe(204);
    await expect.poll(() => get(second, key), { timeout: 1_000, interval: 25 }).toBe(401);
  });
});
