import type { ServerResponse } from 'node:http';
import { constants as http2Constants, type Http2ServerResponse } from 'node:http2';
import { sendError } from './errors.js';
import { endWithGrpcStatus, grpcStatus, isGrpcCall } from './grpc.js';

/** Why the gateway ends an exchange while it runs. */
export type ExchangeCut = 'quota' | 'revoked' | 'expired';

/** What a client is told when the gateway ends its exchange while it runs. */
export const cutMessages: Record<ExchangeCut, string> = {
  quota: 'byte quota exhausted',
  revoked: 'credentials revoked',
  expired: 'credentials expired',
};

const cutGrpcStatus: Record<ExchangeCut, number> = {
  quota: grpcStatus.RESOURCE_EXHAUSTED,
  revoked: grpcStatus.UNAUTHENTICATED,
  expired: grpcStatus.UNAUTHENTICATED,
};

/**
 * Ends a response the gateway will not let run on, in its request's form. One that has not begun (an
 * upload cut while its body passed) is the refusal it would have been at admission: 429, or 401, with
 * `Connection: close` over HTTP/1.1, since the rest of its body is not read. A gRPC call (over HTTP/2)
 * whose answer has begun ends with the status in trailers, as a gRPC server ends a call (8
 * RESOURCE_EXHAUSTED, or 16 UNAUTHENTICATED); any other begun response is cut, its HTTP/2 stream reset
 * with CANCEL (RFC 9113 §7), its HTTP/1.1 connection closed, as a broken response is.
 * @param fields the gateway's response fields, for an answer that has not begun
 * @returns the body bytes of the refusal given, 0 when the answer had begun
 */
export function cutResponse(res: ServerResponse, why: ExchangeCut, fields: readonly string[]): number {
  if (!res.headersSent) {
    const closing = res.req.httpVersionMajor < 2 && !fields.includes('connection');
    const refusal = why === 'quota' ? 'quota_exceeded' : 'unauthorized';
    return sendError(res, refusal, closing ? [...fields, 'connection', 'close'] : fields, cutMessages[why]);
  }
  if (isGrpcCall(res.req)) endWithGrpcStatus(res, cutGrpcStatus[why], cutMessages[why]);
  else if (res.req.httpVersionMajor >= 2)
    (res as unknown as Http2ServerResponse).stream.close(http2Constants.NGHTTP2_CANCEL);
  else res.destroy();
  return 0;
}
