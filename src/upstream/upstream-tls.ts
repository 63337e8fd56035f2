import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import { buildConnector } from 'undici';
import { formatKeyPath, type KeyPath } from '../config/cross-field-rules.js';
import type { ApiConfig, UpstreamTlsConfig } from '../config/schema.js';
import { ConfigError } from '../kit/config-error.js';

/** The TLS options of each connection to an API's `https://` targets, as Node's `tls.connect` takes them. */
export interface UpstreamTlsOptions {
  /** Given, the only CAs trusted (Node's `ca` replaces its default CAs); else the system's are. */
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly servername?: string;
}

/** An API's `upstream.tls`, its files read. */
export interface UpstreamTls {
  readonly options: UpstreamTlsOptions;
  /**
   * A digest of the files' contents and the servername: connections to a target are shared only by the
   * APIs whose settings are the same, and a reload that changes a file's content changes it, so that new
   * connections are made with the new file. It is no secret's text, and is never logged.
   */
  readonly identity: string;
}

/** The upstream TLS of each API that has one, by the API's id. */
export type UpstreamTlsByApi = ReadonlyMap<string, UpstreamTls>;

export const noUpstreamTls: UpstreamTlsByApi = new Map();

/**
 * Reads the files of the `upstream.tls` of `apis` (relative to `cwd`, as the listeners' are) and checks
 * that TLS can use them, at start and in a reload's prepare step, so that a file that cannot be read
 * or used refuses the start or the reload before anything changes.
 * @throws ConfigError naming the key and the file of each one that cannot be read, or the key of
 *   settings whose contents TLS refuses (Node's reason, never the contents).
 */
export function readUpstreamTls(apis: readonly ApiConfig[], cwd: string): UpstreamTlsByApi {
  const byApi = new Map<string, UpstreamTls>();
  const problems: string[] = [];
  apis.forEach((api, i) => {
    if (typeof api.upstream === 'string' || api.upstream.tls === undefined) return;
    const at: KeyPath = ['apis', i, 'upstream', 'tls'];
    const read = readFiles(api.upstream.tls, cwd, at, problems);
    if (read === null) return;
    try {
      createSecureContext(read);
    } catch (error) {
      problems.push(`${formatKeyPath(at)}: TLS cannot use these files: ${(error as Error).message}`);
      return;
    }
    byApi.set(api.id, { options: read, identity: identityOf(read) });
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return byApi;
}

/** The TLS of `apiId`'s target at `origin`: none for an `http://` one, whatever the API says. */
export function tlsOfTarget(byApi: UpstreamTlsByApi, apiId: string, origin: string): UpstreamTls | null {
  return origin.startsWith('https:') ? (byApi.get(apiId) ?? null) : null;
}

/**
 * An undici connector of TLS connections made with `tls`, each opened within `timeout` ms. Its
 * servername, when given, is sent whatever undici asks: undici sends the name of each request's `Host`
 * by SNI otherwise, and that stays the target's.
 */
export function upstreamConnector(tls: UpstreamTls, timeout: number): buildConnector.connector {
  const connect = buildConnector({ ...tls.options, timeout });
  const { servername } = tls.options;
  if (servername === undefined) return connect;
  return (options, callback) => connect({ ...options, servername }, callback);
}

/**
 * The agent of the WebSocket openings to a target with `tls` (http-proxy-3 sends them with Node's
 * `https.request`): an agent's options override each request's, so its servername wins over the one
 * Node takes from the `Host`.
 */
export function webSocketAgent(tls: UpstreamTls): https.Agent {
  return new https.Agent({ ...tls.options });
}

/**
 * The files of `tls`, read; null when one cannot be, or a certificate file holds no certificate (which
 * Node's `ca` would take without a word, trusting nothing), each named in `problems`.
 */
function readFiles(
  tls: UpstreamTlsConfig,
  cwd: string,
  at: KeyPath,
  problems: string[],
): UpstreamTlsOptions | null {
  const options: { -readonly [K in keyof UpstreamTlsOptions]: UpstreamTlsOptions[K] } = {};
  let readable = true;
  for (const name of ['ca', 'cert', 'key'] as const) {
    const file = tls[name];
    if (file === undefined) continue;
    const key = formatKeyPath([...at, name]);
    try {
      options[name] = readFileSync(path.resolve(cwd, file));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      problems.push(`${key}: cannot read ${file} (${code})`);
      readable = false;
      continue;
    }
    if (name !== 'key' && !holdsCertificate(options[name])) {
      problems.push(`${key}: ${file} holds no certificate (PEM expected)`);
      readable = false;
    }
  }
  if (tls.servername !== undefined) options.servername = tls.servername;
  return readable ? options : null;
}

/** Whether `pem` holds certificates, every one of them readable (a CA file may be a bundle of several). */
function holdsCertificate(pem: Buffer): boolean {
  const blocks = pem.toString('latin1').match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g);
  return blocks !== null && blocks.every(readable);
}

function readable(certificate: string): boolean {
  try {
    new X509Certificate(certificate);
    return true;
  } catch {
    return false;
  }
}

function identityOf(options: UpstreamTlsOptions): string {
  const digest = createHash('sha256');
  for (const part of [options.ca, options.cert, options.key, options.servername]) {
    // Each part with its length, so that no two settings run together into one.
    const bytes = part === undefined ? Buffer.alloc(0) : Buffer.from(part);
    digest.update(`${part === undefined ? -1 : bytes.length}:`).update(bytes);
  }
  return digest.digest('hex').slice(0, 32);
}
