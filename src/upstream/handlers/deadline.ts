import type { Clock } from '../../kit/clock.js';
import type { Exchange } from '../exchange.js';
import { DeadlineExceeded } from '../outcomes.js';

/**
 * Starts the call's deadline (`deadlineMs` from its arrival, its `grpc-timeout`) on `clock`: once it
 * passes before the answer is whole, the upstream exchange is ended and the client told so (504, or
 * DEADLINE_EXCEEDED). The exchange's `settle()` clears it. Only a gRPC API's exchanges have one.
 */
export function startDeadline(exchange: Exchange, clock: Clock): void {
  if (exchange.deadlineMs === null) return;
  const left = exchange.deadlineMs - (clock.monotonic() - exchange.arrivedAt);
  exchange.deadline = clock.setTimeout(() => expire(exchange), Math.max(0, left));
}

/** The call's deadline passed: the upstream exchange is ended, and the client told so. */
function expire(exchange: Exchange): void {
  exchange.deadline = null;
  if (exchange.settled) return;
  exchange.failUpstream(new DeadlineExceeded(`the call's grpc-timeout of ${exchange.deadlineMs} ms passed`));
  exchange.controller?.abort(new Error('deadline exceeded'));
}
