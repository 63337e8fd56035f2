import { writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import tls, { type TLSSocket } from 'node:tls';
import type { Socket } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ApiConfig } from '../../src/config/schema.js';
import { ConfigError } from '../../src/kit/config-error.js';
import {
  readUpstreamTls,
  tlsOfTarget,
  upstreamConnector,
  webSocketAgent,
  type UpstreamTls,
} from '../../src/upstream/upstream-tls.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { createPrivateCa, type IssuedCertificate, type PrivateCa } from '../helpers/private-ca.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

const dirs = useTempDirs('quotagate-upstream-tls-');
const defer = cleanupAfterEach();

let dir: string;
let ca: PrivateCa;
let otherCa: PrivateCa;
/** The target's certificate: for api.internal only, signed by `ca`. */
let served: IssuedCertificate;
let client: IssuedCertificate;

beforeAll(async () => {
  dir = dirs.make();
  ca = await createPrivateCa(dir, 'private');
  otherCa = await createPrivateCa(dir, 'other');
  served = await ca.issue('target', ['api.internal']);
  client = await ca.issue('client', ['gateway.internal']);
});

/** An API whose pool has `tls` over `targets` (https by default). */
function api(
  tlsSettings: Record<string, string> | undefined,
  targets = ['https://127.0.0.1:9443'],
): ApiConfig {
  return {
    id: `api-${Object.keys(tlsSettings ?? {}).join('-')}`,
    upstream: { targets, balance: 'round-robin', retries: 0, ...(tlsSettings ? { tls: tlsSettings } : {}) },
  } as unknown as ApiConfig;
}

function problemsOf(run: () => unknown): readonly string[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('no ConfigError');
}

/** A TLS server serving `served` that notes the name each client sent by SNI and its certificate's subject. */
async function tlsTarget(
  options: tls.TlsOptions = {},
): Promise<{ port: number; names: Array<string | false>; subjects: string[] }> {
  const names: Array<string | false> = [];
  const subjects: string[] = [];
  const server = tls.createServer({ key: served.key, cert: served.cert, ...options }, (socket) => {
    names.push(sniOf(socket));
    subjects.push(socket.getPeerX509Certificate()?.subject ?? '');
    socket.end('hello');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port, names, subjects };
}

/** The name a TLS client sent by SNI (Node has it, its types do not), or false. */
const sniOf = (socket: TLSSocket) => (socket as TLSSocket & { servername: string | false }).servername;

/** Opens a connection to 127.0.0.1:`port` with `connector`, as undici asks (its Host's name as servername). */
function connectWith(connector: ReturnType<typeof upstreamConnector>, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    connector(
      {
        hostname: '127.0.0.1',
        host: `localhost:${port}`,
        protocol: 'https:',
        port: String(port),
        servername: 'localhost',
      },
      (error, socket) => (error ? reject(error) : resolve(socket!)),
    );
  });
}

describe('readUpstreamTls', () => {
  it('reads the files of each API with tls, relative to the folder given, and keeps its servername', () => {
    const read = readUpstreamTls(
      [
        api({
          ca: path.basename(ca.certFile),
          cert: client.certFile,
          key: client.keyFile,
          servername: 'api.internal',
        }),
        api(undefined),
      ],
      dir,
    );
    expect([...read.keys()]).toEqual(['api-ca-cert-key-servername']);
    const { options } = read.get('api-ca-cert-key-servername')!;
    expect(options.ca?.toString()).toBe(ca.cert);
    expect(options.cert?.toString()).toBe(client.cert);
    expect(options.key?.toString()).toBe(client.key);
    expect(options.servername).toBe('api.internal');
  });

  it('gives settings of the same files the same identity, and another once a file changes or the servername does', () => {
    const caFile = path.join(dirs.make(), 'ca.pem');
    writeFileSync(caFile, ca.cert);
    const identity = (settings: Record<string, string>) =>
      readUpstreamTls([api(settings)], dir).get(api(settings).id)!.identity;
    const first = identity({ ca: caFile });
    expect(identity({ ca: caFile })).toBe(first);
    expect(identity({ ca: ca.certFile })).toBe(first);
    expect(identity({ ca: caFile, servername: 'api.internal' })).not.toBe(first);
    writeFileSync(caFile, otherCa.cert);
    expect(identity({ ca: caFile })).not.toBe(first);
  });

  it('names the key and the file of each file it cannot read', () => {
    expect(
      problemsOf(() =>
        readUpstreamTls([api({ ca: 'missing-ca.pem', cert: 'missing.pem', key: client.keyFile })], dir),
      ),
    ).toEqual([
      'apis[0].upstream.tls.ca: cannot read missing-ca.pem (ENOENT)',
      'apis[0].upstream.tls.cert: cannot read missing.pem (ENOENT)',
    ]);
  });

  it('reads a CA file that is a bundle of several CAs', () => {
    const bundle = path.join(dirs.make(), 'bundle.pem');
    writeFileSync(bundle, `${otherCa.cert}\n${ca.cert}\n`);
    expect(
      readUpstreamTls([api({ ca: bundle })], dir)
        .get('api-ca')
        ?.options.ca?.toString(),
    ).toBe(`${otherCa.cert}\n${ca.cert}\n`);
  });

  it('refuses a certificate or CA file that holds no certificate, which Node would take as trusting nothing', () => {
    const text = path.join(dirs.make(), 'ca.pem');
    writeFileSync(text, 'not a certificate');
    expect(problemsOf(() => readUpstreamTls([api({ ca: text })], dir))).toEqual([
      `apis[0].upstream.tls.ca: ${text} holds no certificate (PEM expected)`,
    ]);
  });

  it('refuses files TLS cannot use, without a word of the key it was given', () => {
    const garbageKey = path.join(dirs.make(), 'key.pem');
    const secret = 'MHcCAQEEIKeyMaterialThatMustNeverBeLogged';
    writeFileSync(garbageKey, `-----BEGIN PRIVATE KEY-----\n${secret}\n-----END PRIVATE KEY-----\n`);
    const problems = problemsOf(() =>
      readUpstreamTls([api({ cert: client.certFile, key: garbageKey })], dir),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^apis\[0\]\.upstream\.tls: TLS cannot use these files: /);
    expect(problems.join('\n')).not.toContain(secret);
    // A key that is not the certificate's.
    const mismatch = problemsOf(() =>
      readUpstreamTls([api({ cert: client.certFile, key: served.keyFile })], dir),
    );
    expect(mismatch[0]).toMatch(
      /^apis\[0\]\.upstream\.tls: TLS cannot use these files: .*key values mismatch/,
    );
    expect(mismatch.join('\n')).not.toContain(served.key.split('\n')[1]);
  });
});

describe('tlsOfTarget', () => {
  it("gives an API's TLS to its https:// targets only", () => {
    const read = readUpstreamTls([api({ ca: ca.certFile })], dir);
    expect(tlsOfTarget(read, 'api-ca', 'https://10.0.0.1:9443')).toBe(read.get('api-ca'));
    expect(tlsOfTarget(read, 'api-ca', 'http://10.0.0.1:9000')).toBeNull();
    expect(tlsOfTarget(read, 'another', 'https://10.0.0.1:9443')).toBeNull();
  });
});

describe('upstreamConnector', () => {
  const settings = (extra: Record<string, string>): UpstreamTls =>
    readUpstreamTls([api(extra)], dir).get(api(extra).id)!;

  it('trusts the private CA, and sends and checks its servername rather than the name undici asks for', async () => {
    const target = await tlsTarget();
    const socket = await connectWith(
      upstreamConnector(settings({ ca: ca.certFile, servername: 'api.internal' }), 5_000),
      target.port,
    );
    expect((socket as TLSSocket).authorized).toBe(true);
    await new Promise((resolve) => socket.once('data', resolve));
    socket.destroy();
    expect(target.names).toEqual(['api.internal']);
  });

  it('refuses a certificate of a CA other than the one given, and one that does not name the servername', async () => {
    const target = await tlsTarget();
    await expect(
      connectWith(
        upstreamConnector(settings({ ca: otherCa.certFile, servername: 'api.internal' }), 5_000),
        target.port,
      ),
    ).rejects.toMatchObject({ code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
    await expect(
      connectWith(
        upstreamConnector(settings({ ca: ca.certFile, servername: 'other.internal' }), 5_000),
        target.port,
      ),
    ).rejects.toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
  });

  it('sends the client certificate to a target that asks for one', async () => {
    const target = await tlsTarget({ requestCert: true, rejectUnauthorized: true, ca: ca.cert });
    const socket = await connectWith(
      upstreamConnector(
        settings({ ca: ca.certFile, cert: client.certFile, key: client.keyFile, servername: 'api.internal' }),
        5_000,
      ),
      target.port,
    );
    await new Promise((resolve) => socket.once('data', resolve));
    socket.destroy();
    expect(target.subjects).toEqual(['CN=gateway.internal']);
  });
});

describe('webSocketAgent', () => {
  it('makes Node send the servername and the client certificate, whatever Host the request has', async () => {
    const seen: Array<{ name: string | false; subject: string | undefined }> = [];
    const server = https.createServer(
      { key: served.key, cert: served.cert, requestCert: true, rejectUnauthorized: true, ca: ca.cert },
      (req, res) => {
        const socket = req.socket as TLSSocket;
        seen.push({ name: sniOf(socket), subject: socket.getPeerX509Certificate()?.subject });
        res.end('ok');
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { port } = server.address() as AddressInfo;
    const agent = webSocketAgent(
      readUpstreamTls(
        [api({ ca: ca.certFile, cert: client.certFile, key: client.keyFile, servername: 'api.internal' })],
        dir,
      ).get('api-ca-cert-key-servername')!,
    );
    defer(() => agent.destroy());
    const status = await new Promise<number>((resolve, reject) =>
      https
        .get({ host: '127.0.0.1', port, path: '/', agent, headers: { host: `localhost:${port}` } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on('error', reject),
    );
    expect(status).toBe(200);
    expect(seen).toEqual([{ name: 'api.internal', subject: 'CN=gateway.internal' }]);
  });
});
