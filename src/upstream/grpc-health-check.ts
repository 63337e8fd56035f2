import http2 from 'node:http2';
import { isIP } from 'node:net';
import type { UpstreamTls } from './upstream-tls.js';

/** What one check of a gRPC target asks, and of whom. */
export interface GrpcHealthCheck {
  /** The target: `http://` is h2c (prior knowledge), `https://` is TLS with ALPN h2. */
  readonly origin: string;
  /** The service asked about: '' for the whole server. */
  readonly service: string;
  /** The name (and port) `origin`'s address was resolved from: its `:authority` and TLS's name; null for none. */
  readonly host: string | null;
  /** The API's `upstream.tls`, as its calls have it; null for none. */
  readonly tls: UpstreamTls | null;
  /** Ends the check as failed (its timeout, a reload that drops the target, the close). */
  readonly signal: AbortSignal;
}

/** HealthCheckResponse.ServingStatus.SERVING (grpc/health/v1/health.proto). */
const serving = 1;
/** More than a HealthCheckResponse ever is (a few bytes): a target sending more is not answering one. */
const maxAnswerBytes = 1_024;

/**
 * One check by the gRPC health checking protocol (grpc/grpc doc/health-checking.md), as Envoy's
 * `grpc_health_check` sends it: a unary `grpc.health.v1.Health/Check` of `service` on a connection of
 * its own, closed after, so that a check never waits behind a call nor keeps a connection the target
 * would have to hold between checks. Whether the target answered `grpc-status: 0` and SERVING; a
 * refused or cut connection, another status (12 UNIMPLEMENTED: no health service; 5 NOT_FOUND: an
 * unknown service) or an abort is a failed check. It never rejects.
 */
export function checkGrpcHealth(check: GrpcHealthCheck): Promise<boolean> {
  return new Promise((resolve) => {
    if (check.signal.aborted) return resolve(false);
    const session = http2.connect(check.origin, tlsOptionsOf(check));
    const ended = (healthy: boolean) => {
      check.signal.removeEventListener('abort', aborted);
      session.destroy();
      resolve(healthy);
    };
    const aborted = () => ended(false);
    check.signal.addEventListener('abort', aborted, { once: true });
    session.on('error', () => ended(false));
    const stream = session.request({
      ':method': 'POST',
      ':path': '/grpc.health.v1.Health/Check',
      ':authority': check.host ?? new URL(check.origin).host,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let grpcStatus: unknown;
    const chunks: Buffer[] = [];
    let received = 0;
    // A trailers-only answer (an error status) carries grpc-status in its head.
    stream.on('response', (head) => {
      if (head[':status'] !== 200) return ended(false);
      grpcStatus = head['grpc-status'];
    });
    stream.on('trailers', (trailers) => (grpcStatus = trailers['grpc-status']));
    stream.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxAnswerBytes) return ended(false);
      chunks.push(chunk);
    });
    stream.on('end', () => ended(grpcStatus === '0' && servingStatusOf(Buffer.concat(chunks)) === serving));
    stream.on('close', () => ended(false));
    stream.on('error', () => ended(false));
    stream.end(requestOf(check.service));
  });
}

/** The TLS of the check's connection: the API's settings, and the name its certificate must have. */
function tlsOptionsOf(check: GrpcHealthCheck): http2.SecureClientSessionOptions {
  if (check.tls === null) return {};
  const { options } = check.tls;
  if (options.servername !== undefined || check.host === null) return { ...options };
  const hostname = new URL(`http://${check.host}`).hostname;
  // RFC 6066 §3: no IP address by SNI; Node checks the certificate against the address then.
  return isIP(hostname) === 0 ? { ...options, servername: hostname } : { ...options };
}

/**
 * `HealthCheckRequest { string service = 1; }` as one gRPC message: an uncompressed flag, its length
 * (4 bytes, big-endian), then field 1 of wire type 2 (0x0a), its length as a varint and its UTF-8
 * bytes; proto3 sends nothing for '' (an empty message).
 */
export function requestOf(service: string): Buffer {
  const bytes = Buffer.from(service, 'utf8');
  const message =
    bytes.length === 0 ? bytes : Buffer.concat([Buffer.from([0x0a]), varint(bytes.length), bytes]);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

/**
 * The `status` (field 1, a varint) of the one uncompressed `HealthCheckResponse` message in `body`;
 * null when the body is not that. Other fields are skipped, as protobuf readers do.
 */
export function servingStatusOf(body: Buffer): number | null {
  if (body.length < 5 || body[0] !== 0 || body.readUInt32BE(1) !== body.length - 5) return null;
  let status = 0; // proto3's default, UNKNOWN, is sent as nothing
  let at = 5;
  while (at < body.length) {
    const tag = readVarint(body, at);
    if (tag === null) return null;
    at = tag.next;
    const wireType = tag.value & 7;
    if (wireType === 0) {
      const value = readVarint(body, at);
      if (value === null) return null;
      if (tag.value >>> 3 === 1) status = value.value;
      at = value.next;
    } else if (wireType === 2) {
      const length = readVarint(body, at);
      if (length === null) return null;
      at = length.next + length.value;
    } else return null;
  }
  return at === body.length ? status : null;
}

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

/** The varint at `at` (up to 32 bits, all a health answer has), and where the next field begins. */
function readVarint(body: Buffer, at: number): { value: number; next: number } | null {
  let value = 0;
  for (let i = 0; i < 5 && at + i < body.length; i += 1) {
    const byte = body[at + i]!;
    value += (byte & 0x7f) * 2 ** (7 * i);
    if ((byte & 0x80) === 0) return { value, next: at + i + 1 };
  }
  return null;
}
