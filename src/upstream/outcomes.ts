/** How an exchange with the upstream ended. */
export type ProxyOutcome = 'completed' | 'unreachable' | 'timeout' | 'reset' | 'invalid' | 'client_aborted';

/** The upstream answered something no client may be given: a status below 100. */
export class InvalidUpstreamResponse extends Error {
  readonly code = 'UPSTREAM_INVALID_RESPONSE';
}

/** A gRPC call's deadline (its `grpc-timeout`) passed before the upstream's answer was whole. */
export class DeadlineExceeded extends Error {
  readonly code = 'GRPC_DEADLINE_EXCEEDED';
}

/** The upstream did not answer an upgrade request within `proxyTimeout`. */
export class UpgradeTimeout extends Error {
  readonly code = 'UPSTREAM_UPGRADE_TIMEOUT';
}

const timeoutCodes: ReadonlySet<string> = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'GRPC_DEADLINE_EXCEEDED',
  'UPSTREAM_UPGRADE_TIMEOUT',
]);

/** Whether the upstream exchange failed for time: the client is then told 504, else 502. */
export const timedOut = (error: Error): boolean =>
  timeoutCodes.has((error as NodeJS.ErrnoException).code ?? '');

/**
 * An answer of the upstream that breaks HTTP: a status below 100, a 101 nobody asked for or a 100 nobody
 * waited for (undici calls these a bad upgrade or a bad response), or bytes its parser refuses.
 */
export function isInvalidAnswer(error: Error): boolean {
  const { code } = error as NodeJS.ErrnoException;
  return (
    error instanceof InvalidUpstreamResponse ||
    (typeof code === 'string' && code.startsWith('HPE_')) ||
    (code === 'UND_ERR_SOCKET' && /^bad (?:upgrade|response)$/.test(error.message))
  );
}

/**
 * How a failed exchange ended, from its error: `answered` says whether the upstream's head had come
 * (a failure after it is a reset, before it the upstream was unreachable).
 */
export function failureOutcome(error: Error, answered: boolean): ProxyOutcome {
  if (timedOut(error)) return 'timeout';
  if (isInvalidAnswer(error)) return 'invalid';
  return answered ? 'reset' : 'unreachable';
}
