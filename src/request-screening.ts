import type { IncomingMessage } from 'node:http';

/**
 * Fields with which a client could make the upstream run something other than what the gateway routed,
 * authenticated and counted: frameworks (IIS, Symfony, Zend; Express's method-override, ASP.NET, Google
 * APIs) take the path or the verb from them instead of the request line.
 */
export const targetOverrideFields = [
  'x-original-url',
  'x-rewrite-url',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
] as const;

/**
 * Why a request must be refused (400) before it is routed, or null. Node's parser has already refused
 * malformed framing (Content-Length with Transfer-Encoding, two Content-Lengths, a Transfer-Encoding not
 * ending in chunked); what it lets through and is checked here:
 * - several Host lines (RFC 9112 §3.2: 400), which the data plane joins with a comma;
 * - Transfer-Encoding on HTTP/1.0 (RFC 9112 §6.1: faulty framing);
 * - a target-override field (`targetOverrideFields`).
 */
export function screeningProblem(req: IncomingMessage): string | null {
  const { headers } = req;
  if (headers.host?.includes(',')) return 'more than one Host';
  if (req.httpVersionMinor === 0 && req.httpVersionMajor === 1 && headers['transfer-encoding'] !== undefined)
    return 'Transfer-Encoding on HTTP/1.0';
  for (const name of targetOverrideFields) {
    if (headers[name] !== undefined) return `${name} would override the routed target`;
  }
  return null;
}

/** Whether the request announced a body (Node has refused a malformed Content-Length already). */
export function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

// Node's own test for the expectation (lib/_http_server.js), so both agree on which requests wait for 100.
const continueExpectation = /(?:^|\W)100-continue(?:$|\W)/i;

/** Whether the client waits for `100 Continue` before it sends the body. */
export function expectsContinue(req: IncomingMessage): boolean {
  const expect = req.headers.expect;
  return expect !== undefined && continueExpectation.test(expect);
}
