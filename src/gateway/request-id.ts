import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const acceptable = /^[A-Za-z0-9._:@-]{1,128}$/;

/** The client's X-Request-Id when it is one short token, else a new UUID: ids from outside stay log-safe. */
export function requestIdOf(req: IncomingMessage): string {
  const offered = req.headers['x-request-id'];
  return typeof offered === 'string' && acceptable.test(offered) ? offered : randomUUID();
}
