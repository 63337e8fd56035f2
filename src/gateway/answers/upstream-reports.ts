import type { Clock } from '../../kit/clock.js';
import type { Exchange } from '../../upstream/upstream-proxy.js';
import { dataPlaneErrors, sendError } from './errors.js';
import {
  cancelCall,
  clientGrpcStatusOf,
  endTrailersOnly,
  endWithGrpcStatus,
  grpcMessage,
  grpcStatus,
  isGrpcCall,
  noStatusAnswer,
  noteGrpcStatus,
  readGrpcStatus,
} from './grpc.js';

/**
 * How the pipeline renders what upstream/ reports of an exchange (its `ExchangeReports`), in the form the
 * client reads: JSON or a gRPC status.
 */

/**
 * The upstream exchange failed while the client is there: 502, or 504 when it `timedOut`, or 503
 * `upstream_unavailable` when no target of a pool could be reached, when nothing was answered yet; else the answer breaks off, a gRPC call's with its status in trailers.
 */
export function answerUpstreamFailure(
  exchange: Exchange,
  timedOut: boolean,
  unreadMs: number,
  timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
): void {
  const { req, res } = exchange;
  // The upstream went away mid-body: the client must see a broken response, not wait for the rest;
  // a gRPC client is told the call's status in trailers, as a gRPC server would.
  if (res.headersSent) {
    if (!isGrpcCall(req)) {
      res.destroy();
      return;
    }
    endWithGrpcStatus(
      res,
      timedOut ? grpcStatus.DEADLINE_EXCEEDED : grpcStatus.UNAVAILABLE,
      timedOut ? 'Gateway Timeout' : 'Bad Gateway',
    );
    // The trailers wait behind what the client has not read: one that has not taken them within
    // `unreadMs` (proxyTimeout: undici's stream was paused on it for as long already when the upstream
    // timed out) is taking nothing, and its stream is reset, so that the exchange, and its slot, end.
    // Destroyed once its stream has closed: all of it was sent, or the client reset it.
    if (res.destroyed) return;
    const unread = timers.setTimeout(() => cancelCall(res), unreadMs);
    res.once('close', () => timers.clearTimeout(unread));
    return;
  }
  const code = timedOut
    ? 'gateway_timeout'
    : nothingReached(exchange)
      ? 'upstream_unavailable'
      : 'bad_gateway';
  exchange.status = dataPlaneErrors[code].status;
  exchange.answeredBytes += sendError(res, code, exchange.fields);
}

/** An API with a pool of targets could reach none of those it tried (a refused or failed connection). */
const nothingReached = (exchange: Exchange) =>
  exchange.targetsTried > 0 && exchange.upstreamOutcome === 'unreachable';

/** Notes the status a gRPC client reads of its call: the `grpc-status` of a 200, else its HTTP status's. */
export function noteUpstreamGrpcStatus(
  exchange: Exchange,
  httpStatus: number,
  value: string | string[] | undefined,
): void {
  noteGrpcStatus(exchange.res, httpStatus === 200 ? readGrpcStatus(value) : clientGrpcStatusOf(httpStatus));
}

/**
 * The status the gateway gives a call whose upstream ended it without one, noted as the client's: the
 * fields to end it with.
 */
export function missingGrpcStatus(exchange: Exchange): readonly string[] {
  noteGrpcStatus(exchange.res, noStatusAnswer.code);
  return noStatusFields;
}

const noStatusFields: readonly string[] = [
  'grpc-status',
  String(noStatusAnswer.code),
  'grpc-message',
  grpcMessage(noStatusAnswer.message),
];

/** Ends a call's response with the upstream's trailers-only `head`, in one HEADERS frame. */
export function relayTrailersOnly(exchange: Exchange, head: readonly string[]): void {
  endTrailersOnly(exchange.res, head);
}
