import { beforeAll, describe, expect, it } from 'vitest';
import {
  checkGrpcHealth,
  requestOf,
  servingStatusOf,
  type GrpcHealthCheck,
} from '../../src/upstream/grpc-health-check.js';
import type { UpstreamTls } from '../../src/upstream/upstream-tls.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startGreeterUpstream } from '../helpers/grpc-greeter.js';
import { startHealthUpstream, type HealthUpstream } from '../helpers/grpc-health.js';
import { grpcHead, startShapedGrpcUpstream } from '../helpers/shaped-grpc-upstream.js';
import { createPrivateCa, type IssuedCertificate, type PrivateCa } from '../helpers/private-ca.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/**
 * One check by the gRPC health checking protocol, against a real grpc-js server of grpc.health.v1.Health:
 * only `grpc-status: 0` with SERVING is healthy.
 */
const defer = cleanupAfterEach();
const dirs = useTempDirs('quotagate-grpc-health-');

let ca: PrivateCa;
let otherCa: PrivateCa;
/** The target's certificate: for api.internal only, signed by `ca`. */
let served: IssuedCertificate;

beforeAll(async () => {
  const dir = dirs.make();
  ca = await createPrivateCa(dir, 'private');
  otherCa = await createPrivateCa(dir, 'other');
  served = await ca.issue('target', ['api.internal']);
});

async function healthUpstream(tls?: { key: Buffer; cert: Buffer }): Promise<HealthUpstream> {
  const upstream = await startHealthUpstream(tls);
  defer(() => upstream.close());
  return upstream;
}

const check = (origin: string, options: Partial<GrpcHealthCheck> = {}) =>
  checkGrpcHealth({
    origin,
    service: '',
    host: null,
    tls: null,
    signal: new AbortController().signal,
    ...options,
  });

const tlsOf = (options: UpstreamTls['options']): UpstreamTls => ({ options, identity: 'test' });

describe('a gRPC health check', () => {
  it('is healthy when the server is SERVING, asking about the service given', async () => {
    const upstream = await healthUpstream();
    upstream.statuses.set('helloworld.Greeter', 'SERVING');
    expect(await check(`http://${upstream.address}`)).toBe(true);
    expect(await check(`http://${upstream.address}`, { service: 'helloworld.Greeter' })).toBe(true);
    expect(upstream.checked).toEqual(['', 'helloworld.Greeter']);
  });

  it('fails when the service is NOT_SERVING, or unknown to the server (NOT_FOUND)', async () => {
    const upstream = await healthUpstream();
    upstream.statuses.set('', 'NOT_SERVING');
    expect(await check(`http://${upstream.address}`)).toBe(false);
    expect(await check(`http://${upstream.address}`, { service: 'helloworld.Missing' })).toBe(false);
    expect(upstream.checked).toEqual(['', 'helloworld.Missing']);
  });

  it('fails when the server has no health service (12 UNIMPLEMENTED)', async () => {
    const greeter = await startGreeterUpstream();
    defer(() => greeter.close());
    expect(await check(`http://${greeter.address}`)).toBe(false);
  });

  it('fails when its signal aborts it before an answer came (its timeout, for a hung server)', async () => {
    const upstream = await healthUpstream();
    upstream.statuses.set('', 'silent');
    const abort = new AbortController();
    const outcome = check(`http://${upstream.address}`, { signal: abort.signal });
    while (upstream.checked.length === 0) await new Promise((resolve) => setImmediate(resolve));
    abort.abort(new Error('the health check timed out'));
    expect(await outcome).toBe(false);
  });

  /** A framed HealthCheckResponse SERVING after an unknown field 2 of `padding` bytes. */
  const servingAfter = (padding: number) => {
    const message = Buffer.concat([
      Buffer.from([0x12, 0x80 | (padding & 0x7f), padding >> 7]),
      Buffer.alloc(padding),
      Buffer.from([0x08, 1]),
    ]);
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(message.length, 1);
    return Buffer.concat([prefix, message]);
  };

  it.each([
    ['SERVING with grpc-status 0 (the control)', servingAfter(200), {}, { 'grpc-status': '0' }, true],
    ['SERVING without grpc-status', servingAfter(200), {}, {}, false],
    ['SERVING with HTTP 503', servingAfter(200), { ':status': 503 }, { 'grpc-status': '0' }, false],
    [
      'SERVING after more bytes than a HealthCheckResponse has',
      servingAfter(1_500),
      {},
      { 'grpc-status': '0' },
      false,
    ],
  ])('tells an answer of %s', async (_shape, message, head, trailers, healthy) => {
    const target = await startShapedGrpcUpstream((stream) => {
      stream.respond(grpcHead(head), { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers(trailers));
      stream.end(message);
    }, defer);
    expect(await check(target.url)).toBe(healthy);
    expect(target.opened()).toBe(1);
  });

  it('fails when the connection is refused', async () => {
    const gone = await startHealthUpstream();
    await gone.close();
    expect(await check(`http://${gone.address}`)).toBe(false);
  });

  it('asks over TLS (ALPN h2) trusting the API’s private CA, and the name the address was resolved from', async () => {
    const upstream = await healthUpstream({ key: Buffer.from(served.key), cert: Buffer.from(served.cert) });
    const origin = `https://${upstream.address}`;
    const caOnly = tlsOf({ ca: Buffer.from(ca.cert) });
    expect(
      await check(origin, { tls: tlsOf({ ca: Buffer.from(ca.cert), servername: 'api.internal' }) }),
    ).toBe(true);
    expect(await check(origin, { tls: caOnly, host: `api.internal:${upstream.port}` })).toBe(true);
    // The certificate names api.internal, not the address; another CA is not trusted.
    expect(await check(origin, { tls: caOnly })).toBe(false);
    expect(
      await check(origin, { tls: tlsOf({ ca: Buffer.from(otherCa.cert), servername: 'api.internal' }) }),
    ).toBe(false);
    expect(upstream.checked).toEqual(['', '']);
  });
});

describe('the health messages', () => {
  it('encode the service as field 1 of a gRPC message, and nothing for the whole server', () => {
    expect(requestOf('')).toEqual(Buffer.from([0, 0, 0, 0, 0]));
    expect(requestOf('a.B')).toEqual(Buffer.from([0, 0, 0, 0, 5, 0x0a, 3, 0x61, 0x2e, 0x42]));
    const long = requestOf('s'.repeat(200));
    expect([...long.subarray(0, 8)]).toEqual([0, 0, 0, 0, 203, 0x0a, 0xc8, 0x01]);
  });

  it('decode the status, skipping unknown fields, and refuse what is not one whole message', () => {
    expect(servingStatusOf(Buffer.from([0, 0, 0, 0, 2, 0x08, 1]))).toBe(1);
    expect(servingStatusOf(Buffer.from([0, 0, 0, 0, 0]))).toBe(0);
    expect(servingStatusOf(Buffer.from([0, 0, 0, 0, 6, 0x12, 2, 0x61, 0x62, 0x08, 2]))).toBe(2);
    expect(servingStatusOf(Buffer.from([1, 0, 0, 0, 2, 0x08, 1]))).toBeNull();
    expect(servingStatusOf(Buffer.from([0, 0, 0, 0, 3, 0x08, 1]))).toBeNull();
    expect(servingStatusOf(Buffer.from([0, 0, 0, 0, 2, 0x0d, 1]))).toBeNull();
  });
});
