import http from 'node:http';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import { adminUser, basicAuth, petsConfig, userAuth, writeSeedConfigDir } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * With `workers: 2` and the memory store, the primary owns the applications made through the portal API
 * and sends them to its workers: a key made on the admin port opens requests on every worker. Through
 * the real CLI; every process is stopped by pid.
 */
let upstream: TestUpstream;
let cli: CliProcess;
let dir: string;
let ports: { http: number; admin: number };

beforeAll(async () => {
  upstream = await startUpstream((_req, res) => res.end('ok'));
  // Access lines wait a minute to be written: only SIGUSR2 has them written within the test.
  dir = writeSeedConfigDir(
    petsConfig(`${upstream.url}/pets`, { workers: 2, accessLog: { flushMs: 60_000 } }),
  );
  cli = spawnCli(['start', '--config-dir', dir, '--pid-file', `${dir}/gateway.pid`]);
  ports = await startedPorts(cli, 30_000);
});
afterAll(async () => {
  cli.child.kill('SIGTERM');
  await cli.exited;
  await upstream.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One request on a connection of its own, so that both workers get some. */
function get(key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(
        `http://127.0.0.1:${ports.http}/pets/1`,
        { agent: false, headers: { authorization: basicAuth(key) } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      )
      .on('error', reject);
  });
}

const admin = async (method: string, target: string, body: unknown) => {
  const res = await fetch(`http://127.0.0.1:${ports.admin}/api/portal/v1.3${target}`, {
    method,
    headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return (await res.json()) as { id: string; key: string };
};

describe('applications with workers: 2', () => {
  it('a key made on the admin port opens requests on every worker, and its revocation closes them', async () => {
    const application = await admin('POST', '/applications', { name: 'Partner portal' });
    const { id, key } = await admin('POST', `/applications/${application.id}/apikeys`, {});
    await expect.poll(() => get(key), { timeout: 1_000, interval: 25 }).toBe(200);
    const statuses = await Promise.all(Array.from({ length: 20 }, () => get(key)));
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    // SIGUSR2 to the primary has every worker write the access lines it has gathered.
    cli.child.kill('SIGUSR2');
    const workersLogged = () =>
      new Set(
        cli
          .stdout()
          .split('\n')
          .filter((line) => line.includes('"msg":"request"') && line.includes('Partner portal'))
          .map((line) => (JSON.parse(line) as { worker: number }).worker),
      ).size;
    await expect.poll(workersLogged, { timeout: 500, interval: 25 }).toBe(2);
    await fetch(
      `http://127.0.0.1:${ports.admin}/api/portal/v1.3/applications/${application.id}/apikeys/${id}`,
      {
        method: 'DELETE',
        headers: { authorization: userAuth(adminUser) },
      },
    );
    await expect
      .poll(
        async () => (await Promise.all(Array.from({ length: 10 }, () => get(key)))).every((s) => s === 401),
        {
          timeout: 1_000,
          interval: 25,
        },
      )
      .toBe(true);
  }, 60_000);
});
