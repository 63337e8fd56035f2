import type { ServerResponse } from 'node:http';

/**
 * Ends `res` with a JSON answer of the gateway's own, never cached.
 * @returns the body bytes sent: none to a HEAD
 */
export function sendJson(
  res: ServerResponse,
  status: number,
  fields: readonly string[],
  body: string,
): number {
  res.writeHead(status, [
    ...fields,
    'content-type',
    'application/json',
    'content-length',
    String(Buffer.byteLength(body)),
    'cache-control',
    'no-store',
  ]);
  res.end(body);
  // Node sends no body in answer to a HEAD.
  return res.req?.method === 'HEAD' ? 0 : Buffer.byteLength(body);
}
