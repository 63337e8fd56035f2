import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { constants as http2Constants, type Http2ServerResponse } from 'node:http2';
import type { Exchange } from '../../upstream/exchange.js';
import { connectionSpecific } from '../edge/http2-messages.js';

/** The gRPC status codes the gateway answers with (grpc/doc/statuscodes.md). */
export const grpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/**
 * The gRPC status of each HTTP status the gateway answers. 400 is INTERNAL, as gRPC's own mapping of
 * HTTP statuses says (grpc/doc/http-grpc-status-mapping.md) and as grpc-go answers a malformed request:
 * INVALID_ARGUMENT is the service's word on a message, and the gateway never reads the messages.
 */
const statusOfHttp: ReadonlyMap<number, number> = new Map([
  [400, grpcStatus.INTERNAL],
  [401, grpcStatus.UNAUTHENTICATED],
  [403, grpcStatus.PERMISSION_DENIED],
  [404, grpcStatus.UNIMPLEMENTED],
  [405, grpcStatus.UNIMPLEMENTED],
  [413, grpcStatus.RESOURCE_EXHAUSTED],
  [429, grpcStatus.RESOURCE_EXHAUSTED],
  [500, grpcStatus.INTERNAL],
  [502, grpcStatus.UNAVAILABLE],
  [503, grpcStatus.UNAVAILABLE],
  [504, grpcStatus.DEADLINE_EXCEEDED],
]);

/** The gRPC status a gRPC client is given for an HTTP status of the gateway's own. */
export const grpcStatusOf = (httpStatus: number): number =>
  statusOfHttp.get(httpStatus) ?? grpcStatus.UNKNOWN;

/**
 * The gRPC status a client reads from an answer's HTTP status when it carries no `grpc-status`
 * (grpc/doc/http-grpc-status-mapping.md, as grpc-js and grpc-go read it): not the gateway's own mapping
 * (`grpcStatusOf`), which says what the gateway answers, and which gRPC says a server must not take
 * from this one.
 */
const clientStatusOfHttp: ReadonlyMap<number, number> = new Map([
  [400, grpcStatus.INTERNAL],
  [401, grpcStatus.UNAUTHENTICATED],
  [403, grpcStatus.PERMISSION_DENIED],
  [404, grpcStatus.UNIMPLEMENTED],
  [429, grpcStatus.UNAVAILABLE],
  [502, grpcStatus.UNAVAILABLE],
  [503, grpcStatus.UNAVAILABLE],
  [504, grpcStatus.UNAVAILABLE],
]);

/** The status a client reads from an upstream's answer of `httpStatus` (not 200) without `grpc-status`. */
export const clientGrpcStatusOf = (httpStatus: number): number =>
  clientStatusOfHttp.get(httpStatus) ?? grpcStatus.UNKNOWN;

/** The highest gRPC status code (16 UNAUTHENTICATED): a client reads any other number as UNKNOWN. */
const lastStatusCode = 16;

/** The status a client reads from a `grpc-status` field: its number, or UNKNOWN for any other value. */
export function readGrpcStatus(value: string | string[] | undefined): number {
  const code = typeof value === 'string' && /^\d{1,2}$/.test(value) ? Number(value) : Number.NaN;
  return code <= lastStatusCode ? code : grpcStatus.UNKNOWN;
}

/** Links a response to the gRPC status its client was given, for the access line. */
const statusKey = Symbol('quotagate.grpcStatus');
type Told = ServerResponse & { [statusKey]?: number };

/** Notes the gRPC status `res`'s client is given (the last one noted is the one it saw). */
export function noteGrpcStatus(res: ServerResponse, code: number): void {
  (res as Told)[statusKey] = code;
}

/** The gRPC status `res`'s client was given, or null when it was given none (it left before). */
export const grpcStatusGiven = (res: ServerResponse): number | null => (res as Told)[statusKey] ?? null;

/** The RPC semantic conventions' attributes of a gRPC call's server span: the system, the status given. */
export function addGrpcSpanAttributes(res: ServerResponse, attributes: Record<string, unknown>): void {
  attributes['rpc.system'] = 'grpc';
  const given = grpcStatusGiven(res);
  if (given !== null) attributes['rpc.grpc.status_code'] = given;
}

/**
 * The RPC semantic conventions' attributes of the client span of a try of a gRPC API's call: the system,
 * service and method of its path (`/package.Service/Method`: gRPC over HTTP/2, "Requests"), and the
 * span's name (`package.Service/Method`); null for any other exchange, which HTTP's conventions name.
 */
export function grpcClientSpanName(
  exchange: Exchange,
  path: string,
  attributes: Record<string, unknown>,
): string | null {
  if (!exchange.grpc) return null;
  const slash = path.lastIndexOf('/');
  attributes['rpc.system'] = 'grpc';
  attributes['rpc.service'] = path.slice(1, slash);
  attributes['rpc.method'] = path.slice(slash + 1);
  return path.slice(1);
}

/**
 * Adds the gRPC status a gRPC API's upstream ended a call with (its trailers', or the head's of a
 * trailers-only answer) to the attributes of the try's client span, and returns the span's error type
 * when the call failed (its code; `missing_grpc_status` when it gave none); null when it is OK, or the
 * answer is no call's end (another API's, or an HTTP status other than 200).
 */
export function addUpstreamGrpcStatus(
  exchange: Exchange,
  statusCode: number,
  attributes: Record<string, unknown>,
): string | null {
  if (!exchange.grpc || statusCode !== 200) return null;
  const given = exchange.responseTrailers?.['grpc-status'] ?? exchange.responseHeaders?.['grpc-status'];
  if (given === undefined) return 'missing_grpc_status';
  const code = readGrpcStatus(given);
  attributes['rpc.grpc.status_code'] = code;
  return code === grpcStatus.OK ? null : String(code);
}

/**
 * What the gateway gives a call whose upstream ended its answer (HTTP 200) without a `grpc-status`: a
 * client of the upstream itself reads such an end as INTERNAL (grpc-go, grpc-js).
 */
export const noStatusAnswer = {
  code: grpcStatus.INTERNAL,
  message: 'Bad Gateway: the upstream ended the call without a grpc-status',
} as const;

/**
 * Whether the request is a gRPC call: its content type is `application/grpc`, alone, with a message
 * format (`+proto`, `+json`) or with parameters (gRPC over HTTP/2, "Content-Type"). gRPC-Web
 * (`application/grpc-web…`) is not: its trailers travel in the body, which the gateway does not write.
 */
export function isGrpcRequest(headers: IncomingHttpHeaders): boolean {
  const type = headers['content-type'];
  if (type === undefined || type.length < 16 || type.slice(0, 16).toLowerCase() !== 'application/grpc')
    return false;
  const next = type.charCodeAt(16);
  // End, `+`, `;`, or a space before parameters.
  return Number.isNaN(next) || next === 0x2b || next === 0x3b || next === 0x20 || next === 0x09;
}

/**
 * Whether the request is a gRPC call the gateway answers in gRPC's form: a gRPC content type over
 * HTTP/2, the only transport gRPC has (gRPC over HTTP/2, "Outline"). Over HTTP/1.1 no gRPC client reads
 * trailers-only answers, and an HTTP client would take the 200 they carry for a success: it is answered
 * in HTTP.
 */
export const isGrpcCall = (req: IncomingMessage): boolean =>
  req.httpVersionMajor >= 2 && isGrpcRequest(req.headers);

/** Printable ASCII but `%`: what `grpc-message` carries as it is. */
const plainMessage = /^[\x20-\x24\x26-\x7e]*$/;

/**
 * `grpc-message` as gRPC writes it: the UTF-8 bytes of the text, those outside printable ASCII and `%`
 * itself percent-encoded (gRPC over HTTP/2, "Responses": Status-Message).
 */
export function grpcMessage(text: string): string {
  if (plainMessage.test(text)) return text;
  let encoded = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    encoded +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return encoded;
}

/**
 * Ends `res` with a gRPC status in trailers-only form (gRPC over HTTP/2, "Responses"): HTTP 200, its
 * `content-type`, `grpc-status` and `grpc-message`, and the gateway's fields (the request id, RateLimit,
 * Retry-After, a challenge), in one HEADERS frame that ends the stream (`endTrailersOnly`). A gRPC client
 * reads them as the call's status and trailing metadata.
 * @param fields response fields as name, value pairs
 * @returns the body bytes sent: none
 */
export function sendGrpcStatus(
  res: ServerResponse,
  httpStatus: number,
  fields: readonly string[],
  message: string,
): number {
  noteGrpcStatus(res, grpcStatusOf(httpStatus));
  endTrailersOnly(res, [
    ...fields,
    'content-type',
    'application/grpc',
    'grpc-status',
    String(grpcStatusOf(httpStatus)),
    'grpc-message',
    grpcMessage(message),
  ]);
  return 0;
}

/**
 * Ends `res` with status 200 and `fields` (name, value pairs, a repeated name as a list) in the one
 * HEADERS frame that ends an HTTP/2 stream: set one by one and then `end()`, for `writeHead` would send
 * them at once and leave the stream open. Fields that exist only on an HTTP/1.1 connection are left out
 * on HTTP/2 (RFC 9113 §8.2.2).
 */
export function endTrailersOnly(res: ServerResponse, fields: readonly string[]): void {
  const http2 = res.req.httpVersionMajor >= 2;
  const set = new Map<string, string | string[]>();
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!.toLowerCase();
    if (http2 && connectionSpecific.has(name)) continue;
    const value = fields[i + 1]!;
    const known = set.get(name);
    set.set(name, known === undefined ? value : [...(Array.isArray(known) ? known : [known]), value]);
  }
  res.statusCode = 200;
  for (const [name, value] of set) res.setHeader(name, value);
  res.end();
}

/**
 * Ends a gRPC response that has begun with a status of the gateway's own in its trailers, where the
 * client reads trailers (HTTP/2); elsewhere the response is cut, as any broken response is.
 */
export function endWithGrpcStatus(res: ServerResponse, code: number, message: string): void {
  if (res.req.httpVersionMajor < 2) {
    res.destroy();
    return;
  }
  noteGrpcStatus(res, code);
  res.addTrailers({ 'grpc-status': String(code), 'grpc-message': grpcMessage(message) });
  res.end();
}

/**
 * Resets a call's HTTP/2 stream with CANCEL (RFC 9113 §7), which its client reads as 1 CANCELLED (gRPC
 * over HTTP/2, "Errors"): for a call that cannot be told its status.
 */
export function cancelCall(res: ServerResponse): void {
  const { stream } = res as unknown as Http2ServerResponse;
  if (stream.closed) return;
  noteGrpcStatus(res, grpcStatus.CANCELLED);
  stream.close(http2Constants.NGHTTP2_CANCEL);
}
