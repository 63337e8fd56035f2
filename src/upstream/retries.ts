import type { Exchange } from './exchange.js';
import { isInvalidAnswer } from './outcomes.js';

/** Failures to connect: nothing of the request went out, so any request may go to another target. */
const notConnected: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** A connection cut before any answer came: the request may have been taken, and acted on. */
const cutBeforeAnswer: ReadonlySet<string> = new Set(['ECONNRESET', 'UND_ERR_SOCKET']);

/** Methods a client may send twice to the same effect (RFC 9110 §9.2.2). */
const idempotent: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/**
 * Whether the exchange, failed with `error`, may go to another target of its API's pool: never once the
 * upstream's head came, the client has a byte of the answer, or a byte of the request body was read
 * (it cannot be sent again); a connection that could not be opened, for any method; a connection cut
 * before any answer, for an idempotent request without a body only. A gRPC call is never sent again
 * (its API has one target).
 */
export function mayGoElsewhere(error: Error, exchange: Exchange): boolean {
  if (exchange.upstreamMs !== null || exchange.res.headersSent || exchange.bytesIn > 0 || exchange.grpc)
    return false;
  const code = (error as NodeJS.ErrnoException).code ?? '';
  if (notConnected.has(code)) return true;
  return (
    cutBeforeAnswer.has(code) &&
    !isInvalidAnswer(error) &&
    !exchange.hasBody &&
    idempotent.has(exchange.req.method ?? '')
  );
}
