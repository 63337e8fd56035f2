import type { Exchange } from './exchange.js';
import { StreamRefused } from './http2-upstream.js';
import { isInvalidAnswer } from './outcomes.js';

/** Failures to connect: nothing of the request went out, so any request may go to another target. */
const notConnected: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  // The pool of an origin no API in force uses any more, closed (origins.ts's `retireUnused`).
  'UND_ERR_CLOSED',
]);

/**
 * Whether the connection for the exchange could not be opened: nothing of the request went out, so that
 * sending it to another target loads the pool no more than the request itself does.
 */
export const couldNotConnect = (error: Error): boolean =>
  notConnected.has((error as NodeJS.ErrnoException).code ?? '');

/** A connection cut before any answer came: the request may have been taken, and acted on. */
const cutBeforeAnswer: ReadonlySet<string> = new Set(['ECONNRESET', 'UND_ERR_SOCKET']);

/** Answers that say the target could not serve the request (a gateway's, RFC 9110 §15.6.3-5): Envoy's `gateway-error`. */
const gatewayErrors: ReadonlySet<number> = new Set([502, 503, 504]);

/** Methods a client may send twice to the same effect (RFC 9110 §9.2.2). */
const idempotent: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/**
 * Whether the exchange, failed with `error`, may go to another target of its API's pool: never once the
 * upstream's head came or the client has a byte of the answer. A stream its target refused was not
 * processed (RFC 9113 §8.7: REFUSED_STREAM, or above a GOAWAY's last stream id), so any call may go
 * again, gRPC's too, when its body can be sent again from its start: the gateway streams request
 * bodies, and keeps only their first bytes (replayable-body.ts). Otherwise never once a byte of the
 * request body was read (it cannot be sent again); a connection that could not be opened, for any
 * method, gRPC's too (nothing of the call went out); a connection cut before any answer, for an
 * idempotent request without a body only, never a gRPC call (whose method says nothing of whether it
 * may run twice).
 */
export function mayGoElsewhere(error: Error, exchange: Exchange): boolean {
  if (exchange.upstreamMs !== null || exchange.res.headersSent) return false;
  if (error instanceof StreamRefused) return error.bodyKept;
  if (exchange.bytesIn > 0) return false;
  const code = (error as NodeJS.ErrnoException).code ?? '';
  if (notConnected.has(code)) return true;
  return (
    cutBeforeAnswer.has(code) &&
    !exchange.grpc &&
    !isInvalidAnswer(error) &&
    !exchange.hasBody &&
    idempotent.has(exchange.req.method ?? '')
  );
}

/**
 * Whether the exchange, answered `statusCode` by its target, may go to another target instead: a 502,
 * 503 or 504 to an idempotent request without a body, told as its head came, before any of it was
 * written to the client (its head included), and while the client waits for it. A POST is never sent
 * twice so: the target took it, and may have acted on it.
 */
export function mayGoElsewhereAfter(statusCode: number, exchange: Exchange): boolean {
  return (
    gatewayErrors.has(statusCode) &&
    !exchange.res.headersSent &&
    !exchange.hasBody &&
    !exchange.grpc &&
    exchange.drained === null &&
    idempotent.has(exchange.req.method ?? '')
  );
}
