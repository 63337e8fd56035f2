import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { JwtSettings } from './identity-provider.js';
import { freePort, listening, start, until, type Running } from './processes.js';

export const benchKey = 'bench-key-0123456789abcdef0123456789';
/** The Authorization header of the bench's API key (basic auth, key as user name, no password). */
export const benchAuthorization = `Basic ${Buffer.from(`${benchKey}:`).toString('base64')}`;
const admin = { username: 'bench', password: 'bench-admin-password' };
const adminAuth = `Basic ${Buffer.from(`${admin.username}:${admin.password}`).toString('base64')}`;
const systemQuota = '00000000-0000-0000-0000-000000000000';

export interface Gateway extends Running {
  url: string;
  adminUrl: string;
  pid: number;
}

/** What a bench gateway runs beyond routing and proxying (the layers of the ablation table). */
export interface GatewayLayers {
  /**
   * 'basic': the bench key as basic user name (the default); 'none': no authentication at all; `{ jwt }`:
   * bearer tokens of the bench's identity provider.
   */
  auth?: 'basic' | 'none' | { jwt: JwtSettings };
  /**
   * Access logging: off (LOG_LEVEL warn, the default, as for nginx and the peer) or on (LOG_LEVEL info, a
   * JSON line per request on stdout, which start() points at /dev/null).
   */
  accessLog?: boolean;
  /** Data-plane worker processes (`workers`): 1 (the default here), N, or 'auto' (one per core). */
  workers?: number | 'auto';
  /** The built CLI to start: this checkout's (`dist/cli.js`), or another build's to compare with. */
  cli?: string;
  /**
   * More origins of the same upstream: the API's upstream is then a pool of `upstream` and these
   * (round-robin), each checked for health every second.
   */
  moreTargets?: readonly string[];
  /** The config's `notifications` (threshold alerts), when the row has them. */
  notifications?: Record<string, unknown>;
  /** The config's `tracing` (OpenTelemetry export), when the row has it. */
  tracing?: Record<string, unknown>;
}

/** Starts `gateway start` (the built CLI) on a config of one API in front of `upstream`. */
export async function startQuotagate(
  dir: string,
  upstream: string,
  store: Record<string, unknown>,
  {
    auth = 'basic',
    accessLog = false,
    workers = 1,
    cli = 'dist/cli.js',
    moreTargets,
    notifications,
    tracing,
  }: GatewayLayers = {},
): Promise<Gateway> {
  const [port, adminPort] = [await freePort(), await freePort()];
  mkdirSync(dir, { recursive: true });
  const config = {
    port,
    workers,
    ...(typeof auth === 'string' ? { APIKeyAuthType: auth } : { APIKeyAuthType: 'jwt', jwt: auth.jwt }),
    ...(auth === 'basic'
      ? { apikey_development: benchKey, apikey_production: `${benchKey}-production` }
      : {}),
    admin: { host: '127.0.0.1', port: adminPort, users: [{ ...admin, role: 'admin' }] },
    store: {
      file: path.join(dir, 'quotas.json'),
      // Only the Redis store keeps a snapshot; the memory store refuses Redis settings.
      ...(store.type === 'redis' ? { snapshotFile: path.join(dir, 'quota-snapshot.json') } : {}),
      ...store,
    },
    ...(notifications ? { notifications } : {}),
    ...(tracing ? { tracing } : {}),
    apis: [
      {
        id: '5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10',
        name: 'Pet Store',
        basePath: '/pets',
        upstream: moreTargets
          ? {
              targets: [upstream, ...moreTargets].map((origin) => `${origin}/pets`),
              healthCheck: { path: '/healthz', interval: 1000, timeout: 500 },
            }
          : `${upstream}/pets`,
        methods: [
          { id: 'c4d2a9e3-71b8-4c6f-9e0d-2a5b8f1c3d32', name: 'getPet', verb: 'GET', path: '/{petId}' },
        ],
      },
    ],
  };
  writeFileSync(path.join(dir, 'default.js'), `module.exports = ${JSON.stringify(config, null, 2)};\n`);
  // Access logs off unless asked for, as for nginx and the peer: the main table measures the request path,
  // not log shipping.
  const running = await start(
    'quotagate',
    process.execPath,
    [cli, 'start', '--config-dir', dir],
    () => listening(adminPort),
    { LOG_LEVEL: accessLog ? 'info' : 'warn' },
  );
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  // The primary's admin listener comes up before its workers listen: /readyz waits for all of them.
  await until(async () => (await fetch(`${adminUrl}/readyz`)).status === 200, 'quotagate readiness');
  return { ...running, url: `http://127.0.0.1:${port}`, adminUrl, pid: running.child.pid! };
}

/** Sets the System quota's restrictions through the admin API. */
export async function setSystemRestrictions(gateway: Gateway, restrictions: unknown[]): Promise<void> {
  const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas/${systemQuota}`, {
    method: 'PUT',
    headers: { authorization: adminAuth, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'API', name: 'System', restrictions }),
  });
  if (res.status !== 200)
    throw new Error(`setting the System quota failed: ${res.status} ${await res.text()}`);
}

/** The units the System quota's first restriction has counted in its current window. */
export async function systemUsage(adminUrl: string): Promise<number> {
  const res = await fetch(`${adminUrl}/api/portal/v1.3/quotas/${systemQuota}/usage`, {
    headers: { authorization: adminAuth },
  });
  if (res.status !== 200) throw new Error(`reading the System quota's usage failed: ${res.status}`);
  const usage = (await res.json()) as { restrictions: Array<{ used: number }> };
  return usage.restrictions[0]?.used ?? 0;
}

/** Two restrictions that match every request and never reject: a throttle and a throttlemb. */
export const neverRejecting = [
  {
    api: '*',
    method: '*',
    type: 'throttle',
    config: { messages: 1_000_000_000_000, per: 1, period: 'hour' },
  },
  // 900,000,000 MB an hour: under the schema's largest mb (its bytes must fit a 15-digit RateLimit q).
  { api: '*', method: '*', type: 'throttlemb', config: { mb: 900_000_000, per: 1, period: 'hour' } },
];
