import { writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { status as grpcStatus } from '@grpc/grpc-js';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocketServer } from 'ws';
import { ConfigError } from '../../src/kit/config-error.js';
import type { ServingGateway } from '../../src/runtime/running-gateway.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { credentials } from '../helpers/grpc-credentials.js';
import { greeterApi, greeterClient, startGreeterUpstream } from '../helpers/grpc-greeter.js';
import { createPrivateCa, type IssuedCertificate, type PrivateCa } from '../helpers/private-ca.js';
import { auth } from '../helpers/proxy-parts.js';
import { request } from '../helpers/raw-http.js';
import { useTempDirs } from '../helpers/temp-dirs.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { echo, mustOpen, wsUrl } from '../helpers/websockets.js';

/**
 * An API's upstream TLS (issue 44, "Upstream TLS"), against real TLS targets: a private CA, the name
 * sent by SNI and checked, a client certificate, on every way the gateway reaches a target (exchanges,
 * WebSocket openings, gRPC calls, health checks), and the files read again on reload.
 */
const dirs = useTempDirs('quotagate-upstream-tls-');
const defer = cleanupAfterEach();

let dir: string;
/** The CA of the targets' certificates, which no system trusts. */
let ca: PrivateCa;
/** Another CA: a target's certificate does not chain to it. */
let otherCa: PrivateCa;
/** The CA of the gateway's client certificate, which a target asking for one trusts. */
let clientCa: PrivateCa;
/** A target's certificate for 127.0.0.1 and localhost. */
let local: IssuedCertificate;
/** A target's certificate for api.internal alone. */
let internal: IssuedCertificate;
let client: IssuedCertificate;

beforeAll(async () => {
  dir = dirs.make();
  ca = await createPrivateCa(dir, 'targets');
  otherCa = await createPrivateCa(dir, 'other');
  clientCa = await createPrivateCa(dir, 'clients');
  local = await ca.issue('local', ['localhost', '127.0.0.1']);
  internal = await ca.issue('internal', ['api.internal']);
  client = await clientCa.issue('gateway', ['gateway.internal']);
});

/** What an HTTPS target saw of one request: its path, its Host, the name sent by SNI, the client's certificate. */
interface Seen {
  url: string;
  host: string | undefined;
  servername: string | false;
  clientSubject: string | null;
}

interface HttpsTarget {
  url: string;
  seen: Seen[];
  /** TLS connections it accepted. */
  connections: () => number;
  /** Answers the requests held so far (those of a path beginning `/held`). */
  release: () => void;
}

/**
 * An HTTPS target on 127.0.0.1 serving `certificate`, answering 200 to every request (`/healthz` too)
 * (a request of a path beginning `/held` once released) and echoing the messages of any WebSocket; with `clientsOf`, it asks for a client certificate and
 * takes only one that CA signed.
 */
async function httpsTarget(certificate: IssuedCertificate, clientsOf?: PrivateCa): Promise<HttpsTarget> {
  const seen: Seen[] = [];
  const held: ServerResponse[] = [];
  let connections = 0;
  const note = (req: IncomingMessage) => {
    const socket = req.socket as TLSSocket;
    seen.push({
      url: req.url ?? '',
      host: req.headers.host,
      servername: (socket as TLSSocket & { servername: string | false }).servername,
      clientSubject: socket.getPeerX509Certificate()?.subject ?? null,
    });
  };
  const server = https.createServer(
    {
      key: certificate.key,
      cert: certificate.cert,
      ...(clientsOf ? { requestCert: true, rejectUnauthorized: true, ca: clientsOf.cert } : {}),
    },
    (req, res) => {
      note(req);
      if (req.url?.startsWith('/held')) held.push(res);
      else res.end('from the target');
    },
  );
  server.on('secureConnection', () => (connections += 1));
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    note(req);
    wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (data) => ws.send(data.toString())));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(async () => {
    for (const ws of wss.clients) ws.terminate();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  });
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    connections: () => connections,
    release: () => {
      for (const res of held.splice(0)) res.end('released');
    },
  };
}

/** An API of its own under `basePath` with `upstream`, its ids made from `n`. */
const tlsApi = (n: number, basePath: string, upstream: unknown) => ({
  id: `6a0e4c2b-0000-4000-8000-00000000000${n}`,
  name: basePath,
  basePath,
  upstream,
  methods: [{ id: `6a0e4c2b-1111-4000-8000-00000000000${n}`, name: 'get', verb: 'GET', path: '/{id}' }],
});

/** A config of the APIs `apis`. */
const configOf = (...apis: unknown[]) => petsConfig('http://127.0.0.1:9', { apis });

async function gatewayOf(config: Record<string, unknown>, clock?: FakeClock): Promise<TestGateway> {
  const gateway = await startTestGateway(config, {}, clock ? { timers: clock } : {});
  defer(() => gateway.close());
  return gateway;
}

const get = async (gateway: TestGateway, path: string) =>
  (await request(gateway.url, { path, headers: auth })).status;

describe('the TLS of an upstream', () => {
  it('trusts a private CA named by tls.ca, for that API alone, where the system CAs do not', async () => {
    const target = await httpsTarget(local);
    const gateway = await gatewayOf(
      configOf(
        tlsApi(1, '/trusting', { targets: [target.url], tls: { ca: ca.certFile } }),
        tlsApi(2, '/system', { targets: [target.url] }),
        tlsApi(3, '/other', { targets: [target.url], tls: { ca: otherCa.certFile } }),
      ),
    );
    // The three APIs share the target's origin: each has connections of its own TLS.
    expect(await get(gateway, '/trusting/1')).toBe(200);
    expect(await get(gateway, '/system/1')).toBe(503);
    expect(await get(gateway, '/other/1')).toBe(503);
    expect(await get(gateway, '/trusting/2')).toBe(200);
    expect(target.seen.map(({ url }) => url)).toEqual(['/1', '/2']);
    const failures = gateway.logs.filter((line) => line.msg === 'upstream exchange failed');
    expect(failures.map(({ err }) => (err as { code: string }).code)).toEqual([
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    ]);
  });

  it('sends servername by SNI and checks it in the certificate, the Host staying the target’s', async () => {
    const target = await httpsTarget(internal);
    // Named by a host name, which undici would send by SNI as the Host's.
    const url = target.url.replace('127.0.0.1', 'localhost');
    const gateway = await gatewayOf(
      configOf(
        tlsApi(1, '/right', { targets: [url], tls: { ca: ca.certFile, servername: 'api.internal' } }),
        tlsApi(2, '/wrong', { targets: [url], tls: { ca: ca.certFile, servername: 'other.internal' } }),
        tlsApi(3, '/none', { targets: [url], tls: { ca: ca.certFile } }),
      ),
    );
    expect(await get(gateway, '/right/1')).toBe(200);
    expect(await get(gateway, '/wrong/1')).toBe(503);
    // Without servername, the target URL's host is sent, and checked.
    expect(await get(gateway, '/none/1')).toBe(503);
    expect(target.seen).toEqual([
      { url: '/1', host: new URL(url).host, servername: 'api.internal', clientSubject: null },
    ]);
    expect(gateway.logs.find((line) => line.msg === 'upstream exchange failed')).toMatchObject({
      err: { code: 'ERR_TLS_CERT_ALTNAME_INVALID' },
    });
  });

  it('sends the client certificate to a target that asks for one, which refuses the API without it', async () => {
    const target = await httpsTarget(local, clientCa);
    const gateway = await gatewayOf(
      configOf(
        tlsApi(1, '/mtls', {
          targets: [target.url],
          tls: { ca: ca.certFile, cert: client.certFile, key: client.keyFile },
        }),
        tlsApi(2, '/anonymous', { targets: [target.url], tls: { ca: ca.certFile } }),
      ),
    );
    expect(await get(gateway, '/mtls/1')).toBe(200);
    expect([502, 503]).toContain(await get(gateway, '/anonymous/1'));
    expect(target.seen).toEqual([
      { url: '/1', host: new URL(target.url).host, servername: false, clientSubject: 'CN=gateway.internal' },
    ]);
  });

  it('opens a WebSocket to a wss target with the private CA, the servername and the client certificate', async () => {
    const target = await httpsTarget(internal, clientCa);
    const gateway = await gatewayOf(
      configOf(
        tlsApi(1, '/live', {
          targets: [target.url],
          tls: { ca: ca.certFile, cert: client.certFile, key: client.keyFile, servername: 'api.internal' },
        }),
      ),
    );
    const { ws } = await mustOpen(wsUrl(gateway.url, '/live/1'), auth);
    defer(() => ws.terminate());
    expect(await echo(ws, 'hello')).toBe('hello');
    expect(target.seen).toEqual([
      {
        url: '/1',
        host: new URL(target.url).host,
        servername: 'api.internal',
        clientSubject: 'CN=gateway.internal',
      },
    ]);
  });

  it('reaches a gRPC target behind the private CA, which the API without tls.ca cannot', async () => {
    const greeter = await startGreeterUpstream({
      key: Buffer.from(local.key),
      cert: Buffer.from(local.cert),
    });
    defer(() => greeter.close());
    const url = `https://localhost:${greeter.port}`;
    const greeterWith = (upstream: unknown) => ({ ...greeterApi(url), upstream });
    for (const [upstream, code] of [
      [{ targets: [url], tls: { ca: ca.certFile } }, grpcStatus.OK],
      [{ targets: [url] }, grpcStatus.UNAVAILABLE],
    ] as const) {
      const gateway = await gatewayOf(configOf(greeterWith(upstream)));
      const grpcClient = greeterClient(new URL(gateway.url).host);
      defer(() => grpcClient.close());
      const call = await grpcClient.sayHello('ann', credentials());
      expect(call.status.code).toBe(code);
      if (code === grpcStatus.OK) expect(call.replies).toEqual([{ message: 'Hello ann' }]);
    }
  });

  it('checks the health of an https target with the API’s TLS: healthy with its CA, out without', async () => {
    const clock = new FakeClock();
    const target = await httpsTarget(local);
    const healthCheck = {
      path: '/healthz',
      interval: 1_000,
      timeout: 500,
      unhealthyAfter: 2,
      healthyAfter: 2,
    };
    const gateway = await gatewayOf(
      configOf(
        tlsApi(1, '/trusting', { targets: [target.url], tls: { ca: ca.certFile }, healthCheck }),
        tlsApi(2, '/system', { targets: [target.url], healthCheck }),
      ),
      clock,
    );
    await clock.advance(healthCheck.interval);
    await vi.waitFor(() =>
      expect(
        gateway.logs.filter((line) => line.msg === 'upstream target out: its health checks fail'),
      ).toEqual([expect.objectContaining({ api: tlsApi(2, '', '').id, target: target.url })]),
    );
    await vi.waitFor(() => expect(target.seen.filter(({ url }) => url === '/healthz')).toHaveLength(2));
    const upstreams = (gateway.running as ServingGateway).upstreams();
    expect(upstreams.map(({ api, targets }) => [api, targets[0]!.healthy])).toEqual([
      [tlsApi(1, '', '').id, true],
      [tlsApi(2, '', '').id, false],
    ]);
  });
});

describe('the TLS files of an upstream, read again', () => {
  it('uses a CA file whose content changed for new connections once reloaded', async () => {
    const target = await httpsTarget(local);
    const caFile = path.join(dirs.make(), 'upstream-ca.pem');
    writeFileSync(caFile, otherCa.cert);
    const config = configOf(tlsApi(1, '/rotated', { targets: [target.url], tls: { ca: caFile } }));
    const gateway = await gatewayOf(config);
    expect(await get(gateway, '/rotated/1')).toBe(503);
    writeFileSync(caFile, ca.cert);
    // Not before the reload: the file is read at start and at each reload.
    expect(await get(gateway, '/rotated/2')).toBe(503);
    expect(await gateway.reloadWith(config)).toMatchObject({ applied: true });
    expect(await get(gateway, '/rotated/3')).toBe(200);
    expect(target.seen.map(({ url }) => url)).toEqual(['/3']);
  });

  it('keeps the exchanges in flight on their connections while new ones are made with the reloaded file', async () => {
    const target = await httpsTarget(local);
    const caFile = path.join(dirs.make(), 'upstream-ca.pem');
    writeFileSync(caFile, ca.cert);
    const config = configOf(tlsApi(1, '/rotating', { targets: [target.url], tls: { ca: caFile } }));
    const gateway = await gatewayOf(config);
    const held = get(gateway, '/rotating/held');
    await vi.waitFor(() => expect(target.seen.map(({ url }) => url)).toEqual(['/held']));
    // A CA the target's certificate does not chain to: new connections fail with it.
    writeFileSync(caFile, otherCa.cert);
    expect(await gateway.reloadWith(config)).toMatchObject({ applied: true });
    expect(await get(gateway, '/rotating/2')).toBe(503);
    expect(target.connections()).toBe(1);
    target.release();
    expect(await held).toBe(200);
  });

  it('refuses a reload whose file TLS cannot use, naming the key, and keeps the TLS in force', async () => {
    const target = await httpsTarget(local);
    const caFile = path.join(dirs.make(), 'upstream-ca.pem');
    writeFileSync(caFile, ca.cert);
    const config = configOf(tlsApi(1, '/kept', { targets: [target.url], tls: { ca: caFile } }));
    const gateway = await gatewayOf(config);
    expect(await get(gateway, '/kept/1')).toBe(200);
    writeFileSync(caFile, 'not a certificate');
    const outcome = await gateway.reloadWith(config);
    expect(outcome).toMatchObject({ applied: false });
    expect(outcome.applied ? [] : outcome.problems).toEqual([
      `apis[0].upstream.tls.ca: ${caFile} holds no certificate (PEM expected)`,
    ]);
    expect(await get(gateway, '/kept/2')).toBe(200);
  });

  it('refuses to start with a file TLS cannot use, naming the key and never the key’s content', async () => {
    const target = await httpsTarget(local);
    const keyFile = path.join(dirs.make(), 'client-key.pem');
    writeFileSync(
      keyFile,
      '-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END PRIVATE KEY-----\n',
    );
    const started = startTestGateway(
      configOf(tlsApi(1, '/broken', { targets: [target.url], tls: { cert: client.certFile, key: keyFile } })),
    );
    const error = (await started.then(
      (gateway) => gateway.close(),
      (failure: unknown) => failure,
    )) as ConfigError;
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.problems).toEqual([
      expect.stringMatching(/^apis\[0\]\.upstream\.tls: TLS cannot use these files: /),
    ]);
    expect(error.message).not.toContain('c2VjcmV0LWtleS1tYXRlcmlhbA');
  });
});
