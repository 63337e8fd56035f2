import { rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  adminUser,
  basicAuth,
  devKey,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { createTestCertificate, fingerprintOf, servedFingerprint } from '../helpers/tls-cert.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * Reloading conf/ in a running gateway (SIGHUP and `gateway reload` call the same `reload()`): real
 * gateways on 127.0.0.1 in front of a real upstream, each test's config rewritten on disk and read
 * again.
 */
const appKey = 'app-key-0123456789abcdef0123456789';
const application = { id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f', name: 'Mobile app' };
const ordersApiId = '9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d';

const defer = cleanupAfterEach();

async function gatewayOver(
  handler?: Parameters<typeof startUpstream>[0],
): Promise<{ gateway: TestGateway; upstream: TestUpstream; config: Record<string, unknown> }> {
  const upstream = await startUpstream(handler);
  defer(() => upstream.close());
  const config = petsConfig(`${upstream.url}/pets`);
  const gateway = await startTestGateway(config);
  defer(() => gateway.close());
  return { gateway, upstream, config };
}

const get = (gateway: TestGateway, key: string, path = '/pets/1') =>
  fetch(`${gateway.url}${path}`, { headers: { authorization: basicAuth(key) } });

const admin = (
  gateway: TestGateway,
  path: string,
  user: { username: string; password: string } = adminUser,
) => fetch(`${gateway.adminUrl}${path}`, { headers: { authorization: userAuth(user) } });

describe('reload', () => {
  it('puts a new application key in force and takes a removed one out, without a restart', async () => {
    const { gateway, config } = await gatewayOver();
    expect((await get(gateway, appKey)).status).toBe(401);

    const withApp = { ...config, applications: [{ ...application, apikey_development: appKey }] };
    expect(await gateway.reloadWith(withApp)).toEqual({ applied: true, kept: [] });
    expect((await get(gateway, appKey)).status).toBe(200);
    expect((await get(gateway, devKey)).status).toBe(200);

    // Rotated out: the key stops working at once.
    expect((await gateway.reloadWith(config)).applied).toBe(true);
    expect((await get(gateway, appKey)).status).toBe(401);
    expect(gateway.logs.filter((line) => line.msg === 'config reloaded')).toHaveLength(2);
    // The new key is one of the config's secrets from then on: never in a log line.
    expect(gateway.rawLogs()).not.toContain(appKey);
  });

  it('refuses a config with mistakes whole, names every one, and keeps serving the running config', async () => {
    const { gateway, config } = await gatewayOver();
    const broken = {
      ...config,
      applications: [{ ...application, apikey_development: appKey }],
      proxyTimeout: -1,
      apis: [{ ...(config.apis as object[])[0], upstream: 'ftp://127.0.0.1/pets' }],
    };
    const outcome = await gateway.reloadWith(broken);
    expect(outcome.applied).toBe(false);
    const problems = outcome.applied ? [] : outcome.problems;
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/default\.mjs: proxyTimeout: must be a positive number of milliseconds$/),
        expect.stringMatching(/default\.mjs: apis\[0\]\.upstream: must be an http\(s\) URL$/),
      ]),
    );
    // Nothing of it is in force: not the new key, and the old upstream still answers.
    expect((await get(gateway, appKey)).status).toBe(401);
    expect((await get(gateway, devKey)).status).toBe(200);
    const refused = gateway.logs.find(
      (line) => line.msg === 'config reload refused: the running config stays',
    );
    expect(refused?.problems).toEqual(problems);
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/^quotagate_config_reloads_total\{result="refused"\} 1$/m);
    expect(metrics).toMatch(/^quotagate_config_last_reload_successful 0$/m);
  });

  it('refuses a config file caught half-written, naming it, and keeps serving the running config', async () => {
    const { gateway, config } = await gatewayOver();
    const file = path.join(gateway.configDir, 'default.mjs');
    const whole = `export default ${JSON.stringify({ ...config, applications: [{ ...application, apikey_development: appKey }] }, null, 2)};\n`;
    writeFileSync(file, whole.slice(0, Math.floor(whole.length / 2)));
    const outcome = await gateway.running.reload();
    expect(outcome.applied).toBe(false);
    expect(outcome.applied ? [] : outcome.problems).toEqual([expect.stringContaining('default.mjs')]);
    expect((await get(gateway, appKey)).status).toBe(401);
    expect((await get(gateway, devKey)).status).toBe(200);
    // Written whole, the same file is taken.
    writeFileSync(file, whole);
    expect((await gateway.running.reload()).applied).toBe(true);
    expect((await get(gateway, appKey)).status).toBe(200);
  });

  it('keeps the settings that need a restart, says which, and applies the rest', async () => {
    const { gateway, config } = await gatewayOver();
    const outcome = await gateway.reloadWith({
      ...config,
      port: 18080,
      store: { type: 'memory', file: 'elsewhere.json' },
      applications: [{ ...application, apikey_development: appKey }],
    });
    expect(outcome).toEqual({ applied: true, kept: ['port (0 → 18080)', 'store'] });
    expect(
      gateway.logs.find((line) => line.msg?.toString().startsWith('these settings cannot change'))?.kept,
    ).toEqual(outcome.applied ? outcome.kept : []);
    // Still on its first port, and the application of the same reload is in force.
    expect((await get(gateway, appKey)).status).toBe(200);
  });

  it('serves a rotated TLS certificate to new connections, and keeps it when a reload turns TLS off', async () => {
    const [first, second] = [await createTestCertificate(), await createTestCertificate()];
    defer(async () => {
      for (const { dir } of [first, second]) rmSync(dir, { recursive: true, force: true });
    });
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const config = petsConfig(`${upstream.url}/pets`, {
      tls: { port: 0, key: first.keyFile, cert: first.certFile },
    });
    const gateway = await startTestGateway(config);
    defer(() => gateway.close());
    const servedCertificate = () => servedFingerprint(gateway.running.ports.https!);
    expect(await servedCertificate()).toBe(fingerprintOf(first.cert));
    const rotated = { ...config, tls: { port: 0, key: second.keyFile, cert: second.certFile } };
    expect(await gateway.reloadWith(rotated)).toEqual({ applied: true, kept: [] });
    expect(await servedCertificate()).toBe(fingerprintOf(second.cert));
    // TLS turned off waits for a restart: the listener keeps the certificate it serves, not the first.
    expect(await gateway.reloadWith(petsConfig(`${upstream.url}/pets`))).toEqual({
      applied: true,
      kept: ['tls'],
    });
    expect(await servedCertificate()).toBe(fingerprintOf(second.cert));
  });

  it('lets a request in flight finish on the config it started on', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const { gateway, config, upstream } = await gatewayOver((req, res) => {
      const answer = () => res.end(`answered ${req.url}`);
      if (req.url?.includes('slow')) void held.then(answer);
      else answer();
    });
    const withSlow = {
      ...config,
      apis: [{ ...(config.apis as object[])[0], passUndeclared: true }],
    };
    expect((await gateway.reloadWith(withSlow)).applied).toBe(true);
    const inFlight = get(gateway, devKey, '/pets/slow');
    await expect.poll(() => upstream.requests.length).toBe(1);

    // The next config serves the API elsewhere, with another key: the request admitted is not affected.
    const moved = {
      ...config,
      apikey_development: appKey,
      apis: [{ ...(config.apis as object[])[0], basePath: '/animals', passUndeclared: true }],
    };
    expect((await gateway.reloadWith(moved)).applied).toBe(true);
    expect((await get(gateway, appKey, '/pets/1')).status).toBe(404);
    expect((await get(gateway, appKey, '/animals/1')).status).toBe(200);
    expect((await get(gateway, devKey, '/animals/1')).status).toBe(401);
    release();
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(await answer.text()).toBe('answered /pets/slow');
  });

  it('keeps the counters: a quota used before the reload stays used after it', async () => {
    const { gateway, config } = await gatewayOver();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'hour')] },
      systemQuotaId,
    );
    expect((await get(gateway, devKey)).status).toBe(200);
    expect((await get(gateway, devKey)).status).toBe(200);
    expect((await gateway.reloadWith({ ...config, proxyTimeout: 20_000 })).applied).toBe(true);
    expect((await get(gateway, devKey)).status).toBe(200);
    expect((await get(gateway, devKey)).status).toBe(429);
  });

  it('changes the admin users and the catalog the Quota API checks restrictions against', async () => {
    const { gateway, config } = await gatewayOver();
    const newAdmin = { username: 'nia', password: 'nia-admin-password', role: 'admin' } as const;
    const quota = {
      type: 'API',
      name: 'Orders',
      restrictions: [{ ...throttle(5, 1, 'minute'), api: ordersApiId }],
    };
    const post = () =>
      fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas`, {
        method: 'POST',
        headers: { authorization: userAuth(newAdmin), 'content-type': 'application/json' },
        body: JSON.stringify(quota),
      });
    expect((await admin(gateway, '/api/portal/v1.3/quotas', newAdmin)).status).toBe(401);

    const orders = {
      id: ordersApiId,
      name: 'Orders',
      basePath: '/orders',
      upstream: 'http://127.0.0.1:9/orders',
      methods: [{ id: '2c4e6a8b-0d1f-4a3c-8e5b-7d9f1b3d5f7a', name: 'listOrders', verb: 'GET', path: '/' }],
    };
    const next = {
      ...config,
      admin: { ...(config.admin as object), users: [newAdmin] },
      apis: [...(config.apis as object[]), orders],
    };
    expect(await gateway.reloadWith(next)).toEqual({ applied: true, kept: [] });
    expect((await admin(gateway, '/api/portal/v1.3/quotas', newAdmin)).status).toBe(200);
    expect((await admin(gateway, '/api/portal/v1.3/quotas')).status).toBe(401);
    expect((await post()).status).toBe(201);
    const document = (await (
      await admin(gateway, '/api/portal/v1.3/apis/openapi.json', newAdmin)
    ).json()) as {
      paths: Record<string, unknown>;
    };
    expect(Object.keys(document.paths).some((path) => path.startsWith('/orders'))).toBe(true);
  });

  it('serves every request while it reloads again and again under load: none fails', async () => {
    const { gateway, config } = await gatewayOver();
    const withApp = { ...config, applications: [{ ...application, apikey_development: appKey }] };
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    defer(async () => agent.destroy());
    const statuses: number[] = [];
    const failures: unknown[] = [];
    let loading = true;
    const request = () =>
      new Promise<void>((resolve) => {
        http
          .get(`${gateway.url}/pets/1`, { agent, headers: { authorization: basicAuth(devKey) } }, (res) => {
            res.resume();
            res.on('end', () => {
              statuses.push(res.statusCode ?? 0);
              resolve();
            });
          })
          .on('error', (error) => {
            failures.push(error);
            resolve();
          });
      });
    const client = async () => {
      while (loading) await request();
    };
    const clients = Array.from({ length: 16 }, client);
    for (let round = 0; round < 10; round += 1) {
      expect((await gateway.reloadWith(round % 2 === 0 ? withApp : config)).applied).toBe(true);
      const answered = statuses.length;
      await expect.poll(() => statuses.length).toBeGreaterThan(answered + 20);
    }
    loading = false;
    await Promise.all(clients);
    expect(failures).toEqual([]);
    expect(statuses.length).toBeGreaterThan(100);
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    expect(gateway.logs.filter((line) => line.msg === 'config reloaded')).toHaveLength(10);
  });

  it('joins reloads asked for while one waits to start; one asked for later reads the files again', async () => {
    const { gateway } = await gatewayOver();
    const first = gateway.running.reload();
    expect(gateway.running.reload()).toBe(first);
    await first;
    const later = gateway.running.reload();
    expect(later).not.toBe(first);
    await later;
    expect(gateway.logs.filter((line) => line.msg === 'config reloaded')).toHaveLength(2);
  });
});
