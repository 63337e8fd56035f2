import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  adminUser,
  applicationDefaultQuotaId,
  basicAuth,
  devKey,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  userAuth,
  withMethods,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * Names people read: the access line names the API, the method and the application; metrics label by
 * name (ids where names repeat); the Quota API says whose quota is whose. Real gateways on 127.0.0.1.
 */
const appKey = 'app-key-0123456789abcdef0123456789';
const otherKey = 'other-key-0123456789abcdef01234567';
const mobile = { id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f', name: 'Mobile app', apikey_development: appKey };
const kiosk = { id: '6e5d4c3b-2a19-4f8e-9d7c-6b5a4f3e2d1c', name: 'Kiosk', apikey_development: otherKey };

const defer = cleanupAfterEach();

async function start(
  extra: Record<string, unknown> = {},
): Promise<{ gateway: TestGateway; upstream: TestUpstream }> {
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, { applications: [mobile, kiosk], ...extra }),
  );
  defer(() => gateway.close());
  return { gateway, upstream };
}

const get = (gateway: TestGateway, key: string, target = '/pets/1') =>
  fetch(`${gateway.url}${target}`, { headers: { authorization: basicAuth(key) } });

const accessLines = (gateway: TestGateway) => gateway.logs.filter((line) => line.msg === 'request');

describe('names in the access log', () => {
  it('names the api, the method and the application, with the path without its query and the client', async () => {
    const { gateway } = await start();
    expect((await get(gateway, appKey, '/pets/7?token=abc')).status).toBe(200);
    expect(accessLines(gateway).at(-1)).toMatchObject({
      api: 'Pet Store',
      method: 'getPet',
      application: 'Mobile app',
      subject: mobile.id,
      path: '/pets/7',
      client: '127.0.0.1',
      status: 200,
    });
    expect((await get(gateway, devKey)).status).toBe(200);
    expect(accessLines(gateway).at(-1)).toMatchObject({ application: 'project' });
    expect((await fetch(`${gateway.url}/pets/1`)).status).toBe(401);
    expect(accessLines(gateway).at(-1)).toMatchObject({ application: null, status: 401 });
  });

  it('writes one of every N lines of 429 answers, each saying so, and every other line', async () => {
    const { gateway } = await start({ accessLog: { sample429: 5 } });
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'hour')] },
      systemQuotaId,
    );
    const statuses: number[] = [];
    for (let i = 0; i < 23; i += 1) statuses.push((await get(gateway, appKey)).status);
    expect(statuses.filter((status) => status === 429)).toHaveLength(20);
    const lines = accessLines(gateway);
    expect(lines.filter((line) => line.status === 200)).toHaveLength(3);
    const rejected = lines.filter((line) => line.status === 429);
    expect(rejected).toHaveLength(4);
    expect(rejected.every((line) => line.sampled === 5)).toBe(true);
    // The metrics count every answer, sampled or not.
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/^quotagate_requests_total\{api="Pet Store",method="getPet",status="429"\} 20$/m);
  });

  it('writes the access lines to accessLog.file, and the rest of the log where it was', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-access-'));
    defer(() => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'logs', 'access.log');
    const { gateway } = await start({ accessLog: { file } });
    expect((await get(gateway, appKey)).status).toBe(200);
    expect((await get(gateway, appKey, '/pets/2')).status).toBe(200);
    await expect
      .poll(() => {
        try {
          return readFileSync(file, 'utf8').trim().split('\n').length;
        } catch {
          return 0;
        }
      })
      .toBe(2);
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.map((line) => line.path)).toEqual(['/pets/1', '/pets/2']);
    expect(lines[0]).toMatchObject({ component: 'access', application: 'Mobile app', service: 'quotagate' });
    expect(
      readFileSync(file, 'utf8')
        .split('\n')[0]!
        .match(/"service"/g),
    ).toHaveLength(1);
    expect(accessLines(gateway)).toEqual([]);
    expect(gateway.logs.some((line) => line.msg === 'gateway started')).toBe(true);
  });
});

describe('names in metrics', () => {
  it('labels requests by API and method name, and by id where two share a name', async () => {
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const twin = {
      id: 'aa11bb22-cc33-4d44-8e55-ff6677889900',
      name: 'getPet',
      verb: 'GET',
      path: '/twin/{id}',
    };
    const gateway = await startTestGateway(withMethods(petsConfig(`${upstream.url}/pets`), [twin]));
    defer(() => gateway.close());
    expect((await get(gateway, devKey, '/pets/1')).status).toBe(200);
    expect((await get(gateway, devKey, '/pets/twin/1')).status).toBe(200);
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(100, 1, 'hour')] },
      systemQuotaId,
    );
    expect((await get(gateway, devKey, '/pets/1')).status).toBe(200);
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toContain(`quotagate_requests_total{api="Pet Store",method="${twin.id}",status="200"} 1`);
    expect(metrics).toMatch(
      /quotagate_requests_total\{api="Pet Store",method="c4d2a9e3-[^"]+",status="200"\} 2/,
    );
    expect(metrics).toContain(
      'quotagate_quota_decisions_total{quota="System",restriction="0",decision="allowed"} 1',
    );
  });
});

describe('names in the Quota API', () => {
  it("says whose own quota a quota is, in the list and when read, and names each application's usage", async () => {
    const { gateway } = await start();
    const own = await fetch(`${gateway.adminUrl}/api/portal/v1.3/applications/${mobile.id}/quota`, {
      method: 'POST',
      headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'APPLICATION', name: 'Mobile', restrictions: [throttle(10, 1, 'hour')] }),
    });
    expect(own.status).toBe(201);
    const created = (await own.json()) as { id: string; application: unknown };
    expect(created.application).toEqual({ id: mobile.id, name: 'Mobile app' });
    const list = (await (
      await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas`, {
        headers: { authorization: userAuth(adminUser) },
      })
    ).json()) as Array<{ id: string; application?: unknown }>;
    expect(list.find((quota) => quota.id === created.id)?.application).toEqual({
      id: mobile.id,
      name: 'Mobile app',
    });
    expect(list.find((quota) => quota.id === systemQuotaId)).not.toHaveProperty('application');

    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(10, 1, 'hour')] },
      applicationDefaultQuotaId,
    );
    expect((await get(gateway, otherKey)).status).toBe(200);
    const usage = (await (
      await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas/${applicationDefaultQuotaId}/usage`, {
        headers: { authorization: userAuth(adminUser) },
      })
    ).json()) as { restrictions: Array<{ applications: unknown[] }> };
    expect(usage.restrictions[0]!.applications).toEqual([
      { application: kiosk.id, name: 'Kiosk', used: 1, resetSeconds: expect.any(Number) },
    ]);
  });
});
