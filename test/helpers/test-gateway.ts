import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config/load-config.js';
import type { Clock } from '../../src/kit/clock.js';
import { LogSecrets, createLogger } from '../../src/observe/log.js';
import { secretValues } from '../../src/kit/secret-redaction.js';
import type { ReloadOutcome } from '../../src/reload/config-reloader.js';
import type { RunningGateway } from '../../src/server.js';
import { startGateway } from '../../src/server.js';
import { startUpstream, type TestUpstream } from './upstream.js';
import type { HostResolver } from '../../src/upstream/target-addresses.js';

export const devKey = 'dev-key-0123456789abcdef0123456789';
export const prodKey = 'prod-key-0123456789abcdef012345678';
export const petsApiId = '5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10';
export const getPetMethodId = 'c4d2a9e3-71b8-4c6f-9e0d-2a5b8f1c3d32';

/** The well-known quotas: System (all traffic) and Application Default (per application). */
export const systemQuotaId = '00000000-0000-0000-0000-000000000000';
export const applicationDefaultQuotaId = '00000000-0000-0000-0000-000000000001';

/** A throttle restriction: `messages` per `per` × `period`, on every API and method unless `extra` says. */
export const throttle = (
  messages: number,
  per: number,
  period: string,
  extra: Record<string, unknown> = {},
) => ({ api: '*', method: '*', type: 'throttle', config: { messages, per, period }, ...extra });

/** A concurrency restriction: `connections` requests in flight at once, on every API and method unless `extra` says. */
export const concurrency = (connections: number, extra: Record<string, unknown> = {}) => ({
  api: '*',
  method: '*',
  type: 'concurrency',
  config: { connections },
  ...extra,
});

/** A throttlemb restriction: `megabytes` per `per` × `period`, on every API and method. */
export const mb = (megabytes: number, per: number, period: string) => ({
  api: '*',
  method: '*',
  type: 'throttlemb',
  config: { mb: megabytes, per, period },
});

/** Admin users of every test config (plain passwords are allowed outside production). */
export const adminUser = { username: 'ann', password: 'ann-admin-password', role: 'admin' } as const;
export const memberUser = { username: 'max', password: 'max-member-password', role: 'member' } as const;

/** A config of one API (`/pets` → upstream) in the seed's format, ready for overrides. */
export function petsConfig(
  upstream: string,
  overrides: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    port: 0,
    APIKeyAuthType: 'basic',
    apikey_development: devKey,
    apikey_production: prodKey,
    admin: { host: '127.0.0.1', port: 0, users: [adminUser, memberUser] },
    apis: [
      {
        id: petsApiId,
        name: 'Pet Store',
        basePath: '/pets',
        upstream,
        methods: [
          { id: '8b0e6c1a-3f47-4f0e-a2f5-6d9c1e7b4a21', name: 'listPets', verb: 'GET', path: '/' },
          { id: getPetMethodId, name: 'getPet', verb: 'GET', path: '/{petId}' },
          {
            id: '0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f',
            name: 'findByStatus',
            verb: 'GET',
            path: '/findByStatus',
          },
          { id: 'e7a3b5c9-0d14-4b2e-8f6a-9c1d3e5f7a43', name: 'addPet', verb: 'POST', path: '/' },
        ],
      },
    ],
    ...overrides,
  };
}

/** Writes `config` in the seed's format (CommonJS conf/default.js) in a fresh folder and returns the folder. */
export function writeSeedConfigDir(config: Record<string, unknown>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-conf-'));
  const text = JSON.stringify(withPrivateStore(config, dir), null, 2);
  writeFileSync(path.join(dir, 'default.js'), `module.exports = ${text};\n`);
  return dir;
}

/**
 * A test config keeps its quota file (memory store) or its snapshot of the definitions (Redis store) in
 * its own folder, not in the repository's data/.
 */
function withPrivateStore(config: Record<string, unknown>, dir: string): Record<string, unknown> {
  const store = (config.store ?? {}) as Record<string, unknown>;
  if (store.type === 'redis')
    return { ...config, store: { snapshotFile: path.join(dir, 'quota-snapshot.json'), ...store } };
  return store.file
    ? config
    : { ...config, store: { type: 'memory', file: path.join(dir, 'quotas.json'), ...store } };
}

/** Writes `config` as conf/default.mjs in a fresh folder and returns the folder. */
export function writeConfigDir(config: Record<string, unknown>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-conf-'));
  rewriteConfigDir(dir, config);
  return dir;
}

/** Replaces the conf/default.mjs of a folder made by `writeConfigDir` (before a reload). */
export function rewriteConfigDir(dir: string, config: Record<string, unknown>): void {
  const text = JSON.stringify(withPrivateStore(config, dir), null, 2);
  writeFileSync(path.join(dir, 'default.mjs'), `export default ${text};\n`);
}

export interface TestGateway {
  url: string;
  adminUrl: string;
  running: RunningGateway;
  /** The folder of its conf/default.mjs. */
  configDir: string;
  /** Writes a new config and reloads it, as SIGHUP does. */
  reloadWith(config: Record<string, unknown>): Promise<ReloadOutcome>;
  /** Every log line written so far, parsed. */
  logs: Array<Record<string, unknown>>;
  /** Every log line written so far, as written. */
  rawLogs: () => string;
  close(): Promise<void>;
}

/**
 * The clocks a test gateway may be given instead of the system's, and the resolver of its targets' host
 * names (src/server.ts's StartOptions).
 */
export interface StartClocks {
  now?: () => number;
  clock?: () => number;
  timers?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  resolveHost?: HostResolver;
}

/** Starts a gateway in this process on ephemeral ports, with its log captured. */
export async function startTestGateway(
  config: Record<string, unknown>,
  env: NodeJS.ProcessEnv = {},
  clocks: StartClocks = {},
): Promise<TestGateway> {
  const dir = writeConfigDir(config);
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  let running: RunningGateway;
  try {
    const source = { read: () => loadConfig({ configDir: dir, env }) };
    const loaded = await source.read();
    const secrets = new LogSecrets(secretValues({ ...loaded.extras, ...loaded.config }));
    running = await startGateway(loaded, {
      logger: createLogger({ level: 'debug', destination, secrets }),
      source,
      secrets,
      ...clocks,
    });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const logs: Array<Record<string, unknown>> = [];
  return {
    // With `port: false` the data plane is HTTPS only.
    url:
      running.ports.http === undefined
        ? `https://127.0.0.1:${running.ports.https}`
        : `http://127.0.0.1:${running.ports.http}`,
    adminUrl: `http://127.0.0.1:${running.ports.admin}`,
    running,
    configDir: dir,
    reloadWith(next) {
      rewriteConfigDir(dir, next);
      return running.reload();
    },
    get logs() {
      // The access lines a gateway gathers (accessLog.flushMs) are read as soon as they are written.
      running.flushLogs();
      logs.splice(0, logs.length, ...lines.map((line) => JSON.parse(line) as Record<string, unknown>));
      return logs;
    },
    rawLogs: () => {
      running.flushLogs();
      return lines.join('\n');
    },
    async close() {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The access lines a gateway logged so far. */
export const accessLines = (gateway: TestGateway) => gateway.logs.filter((line) => line.msg === 'request');

/** A quota's usage as the admin API answers it to an administrator (the parts tests read). */
export interface UsageAnswer {
  restrictions: Array<{
    mode?: string;
    /** API quotas only. */
    used?: number;
    /** Application quotas only: each application that has units counted. */
    applications?: Array<{ application: string; name: string; used: number }>;
    rejections: { bucketSeconds: number; counts: number[] };
  }>;
}

export async function quotaUsage(adminUrl: string, quotaId: string): Promise<UsageAnswer> {
  const res = await fetch(`${adminUrl}/api/portal/v1.3/quotas/${quotaId}/usage`, {
    headers: { authorization: userAuth(adminUser) },
  });
  return (await res.json()) as UsageAnswer;
}

/** What a restriction's usage says it rejected over the last five minutes. */
export const rejectedOf = (restriction: UsageAnswer['restrictions'][number]) =>
  restriction.rejections.counts.reduce((sum, count) => sum + count, 0);

export const basicAuth = (key: string) => `Basic ${Buffer.from(`${key}:`).toString('base64')}`;

/** The Authorization header of an admin user. */
export const userAuth = (user: { username: string; password: string }) =>
  `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`;

/** Calls the portal API at `/api/portal/v1.3<path>` of `gateway` as the administrator, with a JSON body. */
export const adminCall = (gateway: TestGateway, method: string, path: string, body?: unknown) =>
  fetch(`${gateway.adminUrl}/api/portal/v1.3${path}`, {
    method,
    headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

/** Sets a quota through the admin API, as an administrator would: PUT for a well-known id, else POST. */
export async function setQuota(
  gateway: Pick<TestGateway, 'adminUrl'>,
  quota: Record<string, unknown>,
  id?: string,
): Promise<string> {
  const url = `${gateway.adminUrl}/api/portal/v1.3/quotas${id ? `/${id}` : ''}`;
  const res = await fetch(url, {
    method: id ? 'PUT' : 'POST',
    headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
    body: JSON.stringify(quota),
  });
  if (res.status >= 300) throw new Error(`setting a quota failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

export interface GatewayOverUpstream {
  upstream: TestUpstream;
  gateway: TestGateway;
  /** The gateway's `host:port`, as a Host field names it. */
  host: string;
  close(): Promise<void>;
}

/**
 * A recording upstream and a gateway in front of it, configured by `configFor(upstream URL)` (by default
 * the pets API, its upstream path `/pets`).
 */
export async function startGatewayOverUpstream(
  configFor: (upstreamUrl: string) => Record<string, unknown> = (url) => petsConfig(`${url}/pets`),
): Promise<GatewayOverUpstream> {
  const upstream = await startUpstream();
  const gateway = await startTestGateway(configFor(upstream.url)).catch(async (error: unknown) => {
    await upstream.close();
    throw error;
  });
  return {
    upstream,
    gateway,
    host: new URL(gateway.url).host,
    async close() {
      await gateway.close();
      await upstream.close();
    },
  };
}

/** `config` (a petsConfig) with more methods on its API. */
export function withMethods(
  config: Record<string, unknown>,
  methods: Array<{ id: string; name: string; verb: string; path: string }>,
): Record<string, unknown> {
  const [api, ...rest] = config.apis as Array<{ methods: unknown[] }>;
  return { ...config, apis: [{ ...api, methods: [...api!.methods, ...methods] }, ...rest] };
}
