import { isDeepStrictEqual } from 'node:util';
import type { LoadedConfig } from '../config/load-config.js';
import type { Config } from '../config/schema.js';

/**
 * The settings a running gateway cannot change: its listeners (addresses, ports, TLS on or off, HTTP/2 on or off, the
 * server timeouts Node fixes at creation), its worker processes and its store. A reload keeps them as
 * they run and says which ones it kept; TLS key, certificate and CA files do change live. So does the
 * access log's file name not: a reload opens the file again (after logrotate moved it). Nor does the usage
 * history's setting: its book and its flush are built at start; nor tracing, whose exporter is.
 */
export interface FixedSettings {
  host: Config['host'];
  port: Config['port'];
  workers: Config['workers'];
  http2: Config['http2'];
  tls: Config['tls'] | null;
  admin: Pick<Config['admin'], 'host' | 'port'> & { tls: Config['admin']['tls'] | null };
  store: Config['store'];
  server: Config['server'];
  usageHistory: Config['usageHistory'];
  tracing: Config['tracing'];
  accessLogFile: string | null;
}

export function fixedSettingsOf(config: Readonly<Config>): FixedSettings {
  return {
    host: config.host,
    port: config.port,
    workers: config.workers,
    http2: config.http2,
    tls: config.tls ?? null,
    admin: { host: config.admin.host, port: config.admin.port, tls: config.admin.tls ?? null },
    store: config.store,
    server: config.server,
    usageHistory: config.usageHistory,
    tracing: config.tracing,
    accessLogFile: config.accessLog.file ?? null,
  };
}

export interface PinnedConfig {
  loaded: LoadedConfig;
  /** The settings whose new value waits for a restart, as `port (8080 → 9090)` or `store`. */
  kept: string[];
}

const shown = (value: unknown) => (value === undefined ? 'unset' : JSON.stringify(value));
/** Scalars are shown; objects (the store's URL may hold a password) only named. */
const change = (name: string, running: unknown, wanted: unknown) =>
  [running, wanted].some((value) => typeof value === 'object')
    ? name
    : `${name} (${shown(running)} → ${shown(wanted)})`;

/** `next` with the fixed settings of the running gateway, and the ones that differed. */
export function pinFixedSettings(fixed: FixedSettings, next: LoadedConfig): PinnedConfig {
  const config = next.config;
  const kept: string[] = [];
  const keep = <T>(name: string, running: T, wanted: T): T => {
    if (!isDeepStrictEqual(running, wanted)) kept.push(change(name, running, wanted));
    return running;
  };
  const tls =
    fixed.tls && config.tls
      ? {
          ...config.tls,
          host: keep('tls.host', fixed.tls.host, config.tls.host),
          port: keep('tls.port', fixed.tls.port, config.tls.port),
        }
      : keep('tls', fixed.tls ?? undefined, config.tls);
  const adminTls =
    fixed.admin.tls && config.admin.tls
      ? config.admin.tls
      : keep('admin.tls', fixed.admin.tls ?? undefined, config.admin.tls);
  const pinned: Config = {
    ...config,
    host: keep('host', fixed.host, config.host),
    port: keep('port', fixed.port, config.port),
    workers: keep('workers', fixed.workers, config.workers),
    http2: keep('http2', fixed.http2, config.http2),
    admin: {
      ...config.admin,
      host: keep('admin.host', fixed.admin.host, config.admin.host),
      port: keep('admin.port', fixed.admin.port, config.admin.port),
    },
    store: keep('store', fixed.store, config.store),
    server: keep('server', fixed.server, config.server),
    usageHistory: keep('usageHistory', fixed.usageHistory, config.usageHistory),
    tracing: keep('tracing', fixed.tracing, config.tracing),
    accessLog: {
      ...config.accessLog,
      file: keep('accessLog.file', fixed.accessLogFile ?? undefined, config.accessLog.file),
    },
  };
  if (pinned.accessLog.file === undefined) delete pinned.accessLog.file;
  if (adminTls) pinned.admin.tls = adminTls;
  else delete pinned.admin.tls;
  if (tls) pinned.tls = tls;
  else delete pinned.tls;
  return { loaded: { ...next, config: Object.freeze(pinned) }, kept };
}
