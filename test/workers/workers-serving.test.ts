import { rmSync } from 'node:fs';
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { http2Fetch } from '../helpers/http2-client.js';
import { adminUser, basicAuth, devKey, userAuth } from '../helpers/test-gateway.js';
import { createTestCertificate } from '../helpers/tls-cert.js';
import {
  burst,
  count,
  get,
  httpsGet,
  metricValue,
  setSystemQuota,
  systemUsage,
  useWorkerGateways,
} from '../helpers/worker-gateways.js';

const { startGateway, answeredByWorker, upstream } = useWorkerGateways();

describe('workers: 2', () => {
  it('with the memory store: 200 concurrent requests against a limit of 50 → exactly 50 reach the upstream, served by both workers', async () => {
    const gateway = await startGateway({ workers: 2 });
    expect(gateway.workerPids()).toHaveLength(2);
    await setSystemQuota(gateway, 50);
    const before = upstream().requests.length;
    const statuses = await burst(gateway, 200);
    expect(count(statuses, 200)).toBe(50);
    expect(count(statuses, 429)).toBe(150);
    expect(upstream().requests.length - before).toBe(50);
    await expect.poll(() => [...answeredByWorker(gateway).values()].reduce((a, b) => a + b, 0)).toBe(200);
    expect([...answeredByWorker(gateway).keys()].sort()).toEqual([1, 2]);
    // The console's usage: the counter the primary holds, and the rejections of both workers added up.
    expect(await systemUsage(gateway)).toEqual({ used: 50, rejected: 150 });
  }, 60_000);

  // The primary sends the change down each worker's IPC channel before it answers the DELETE, and a
  // worker reads its channel in order: a request the client can only send after the 204 comes later.
  it('refuses a key revoked through the admin port on every worker, on connections they already hold open', async () => {
    const gateway = await startGateway({ workers: 2 });
    const admin = async (method: string, target: string, body?: unknown) => {
      const res = await fetch(`${gateway.admin}/api/portal/v1.3${target}`, {
        method,
        headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, string> };
    };
    const app = await admin('POST', '/applications', { name: 'Partner portal' });
    expect(app.status).toBe(201);
    const made = await admin('POST', `/applications/${app.body.id}/apikeys`, {});
    expect(made.status).toBe(201);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    try {
      const through = () =>
        Promise.all(Array.from({ length: 32 }, () => get(gateway, '/pets/1', agent, made.body.key)));
      expect(count(await through(), 200)).toBe(32);
      await expect.poll(() => answeredByWorker(gateway).size).toBe(2);
      expect(
        (await admin('DELETE', `/applications/${app.body.id}/apikeys/${made.body.id}`, undefined)).status,
      ).toBe(204);
      expect(count(await through(), 401)).toBe(32);
    } finally {
      agent.destroy();
    }
  }, 60_000);

  it('shares the HTTP and HTTPS ports, each bound once: the started line names them, and both workers answer on each', async () => {
    const certificate = await createTestCertificate();
    try {
      const gateway = await startGateway({
        workers: 2,
        tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
      });
      const line = gateway.logs().find((each) => each.msg === 'gateway started')!;
      expect(line).toMatchObject({ workers: 2, store: 'memory' });
      const shared = line.ports as { http: number; https: number };
      expect(shared.https).not.toBe(shared.http);
      // Each worker writes its own line, through its own pipe: it may arrive after the primary's.
      await expect
        .poll(() =>
          gateway
            .logs()
            .filter((each) => each.msg === 'worker started')
            .map((each) => each.ports),
        )
        .toEqual([
          { ...shared, admin: Number(new URL(gateway.admin).port) },
          { ...shared, admin: Number(new URL(gateway.admin).port) },
        ]);
      // A new connection per request: node:cluster hands connections to the workers in turn.
      for (let i = 0; i < 10; i += 1) expect(await get(gateway, '/pets/1')).toBe(200);
      for (let i = 0; i < 10; i += 1) expect(await httpsGet(shared.https, certificate.cert)).toBe(200);
      await expect.poll(() => answeredByWorker(gateway, 'http').size).toBe(2);
      await expect.poll(() => answeredByWorker(gateway, 'https').size).toBe(2);
    } finally {
      rmSync(certificate.dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('takes HTTP/2 with prior knowledge on every worker, counted against the one limit', async () => {
    const gateway = await startGateway({ workers: 2 });
    await setSystemQuota(gateway, 5);
    const statuses: number[] = [];
    // A session per request: node:cluster hands its connection to the next worker.
    for (let i = 0; i < 10; i += 1) {
      const answer = await http2Fetch(gateway.url, {
        path: '/pets/1',
        headers: { authorization: basicAuth(devKey) },
      });
      statuses.push(answer.status);
    }
    expect([count(statuses, 200), count(statuses, 429)]).toEqual([5, 5]);
    await expect.poll(() => answeredByWorker(gateway).size).toBe(2);
  }, 60_000);

  it('/metrics and /latency on the admin port add up the requests of every worker', async () => {
    const gateway = await startGateway({ workers: 2 });
    for (let i = 0; i < 30; i += 1) expect(await get(gateway, '/pets/1')).toBe(200);
    await expect.poll(() => [...answeredByWorker(gateway).values()].reduce((a, b) => a + b, 0)).toBe(30);
    const perWorker = [...answeredByWorker(gateway).values()];
    expect(perWorker).toHaveLength(2);
    expect(Math.min(...perWorker)).toBeGreaterThan(0);
    expect(await metricValue(gateway, /^quotagate_requests_total\{[^}]*status="200"\} (\d+)$/m)).toBe(30);
    expect(await metricValue(gateway, /^quotagate_request_duration_seconds_count\{[^}]*\} (\d+)$/m)).toBe(30);
    expect(
      await metricValue(gateway, /^quotagate_added_latency_seconds_count\{part="request"\} (\d+)$/m),
    ).toBe(30);
    const latency = (await (await fetch(`${gateway.admin}/latency`)).json()) as {
      request: { count: number };
      response: { count: number };
    };
    expect([latency.request.count, latency.response.count]).toEqual([30, 30]);
    expect(await metricValue(gateway, /^quotagate_workers_listening (\d+)$/m)).toBe(2);
    expect(await metricValue(gateway, /^quotagate_store_shared (\d+)$/m)).toBe(1);
  }, 60_000);
});
