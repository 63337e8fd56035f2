import type { ServerResponse } from 'node:http';
import type { AuthRefusalReason } from '../../auth/authenticator.js';
import { isGrpcCall, sendGrpcStatus } from './grpc.js';
import { sendJson } from './json.js';

/**
 * Every error the data plane answers with. The body format is the seed's
 * (`{"id":"com.vendor.api.<code>","message":"...","success":false}`); the README lists each code.
 */
export const dataPlaneErrors = {
  bad_request: { status: 400, message: 'Bad Request' },
  unauthorized: { status: 401, message: 'Unauthorized' },
  not_found: { status: 404, message: 'Not Found' },
  method_not_allowed: { status: 405, message: 'Method Not Allowed' },
  payload_too_large: { status: 413, message: 'Payload Too Large' },
  quota_exceeded: { status: 429, message: 'Too Many Requests' },
  internal_error: { status: 500, message: 'Internal Server Error' },
  bad_gateway: { status: 502, message: 'Bad Gateway' },
  service_unavailable: { status: 503, message: 'Service Unavailable' },
  /** No target of the API's pool could be reached. */
  upstream_unavailable: { status: 503, message: 'Service Unavailable: no upstream target could be reached' },
  gateway_timeout: { status: 504, message: 'Gateway Timeout' },
  http_version_not_supported: { status: 505, message: 'HTTP Version Not Supported' },
} as const;

export type DataPlaneErrorCode = keyof typeof dataPlaneErrors;

const bodies = new Map(
  Object.entries(dataPlaneErrors).map(([code, { message }]) => [
    code,
    JSON.stringify({ id: `com.vendor.api.${code}`, message, success: false }),
  ]),
);

/**
 * What a client is told of an authentication refusal whose reason it can act on, after the code's
 * message (the id stays the code's, so that a client that reads the id sees no difference).
 */
export const authRefusalDetails: Record<AuthRefusalReason, string> = {
  https_required: 'API keys are accepted over HTTPS only (this is the plain-HTTP port)',
  several_credentials: 'the request carries credentials of more than one scheme: send one',
};

/** The exact JSON body of an error response. */
export function errorBody(code: DataPlaneErrorCode): string {
  return bodies.get(code) as string;
}

/**
 * Ends `res` with the error, in the form its request reads: the error's status and JSON body, or to a
 * gRPC call (`content-type: application/grpc…` over HTTP/2) the gRPC status of that status, with the message as
 * `grpc-message` (answers/grpc.ts). Does nothing when the response has already started.
 * @param fields extra response fields as name, value pairs (the request id, rate-limit fields, a challenge)
 * @param detail what the client can do about it, after the code's message (`Payload Too Large: …`):
 * never anything internal
 * @returns the body bytes sent: none when an answer had begun already, to a HEAD, or to a gRPC call
 */
export function sendError(
  res: ServerResponse,
  code: DataPlaneErrorCode,
  fields: readonly string[] = [],
  detail?: string,
): number {
  if (res.headersSent) return 0;
  const { status, message } = dataPlaneErrors[code];
  if (isGrpcCall(res.req))
    return sendGrpcStatus(res, status, fields, detail === undefined ? message : `${message}: ${detail}`);
  const body =
    detail === undefined
      ? errorBody(code)
      : JSON.stringify({ id: `com.vendor.api.${code}`, message: `${message}: ${detail}`, success: false });
  return sendJson(res, status, fields, body);
}
