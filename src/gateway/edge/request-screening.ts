import type { IncomingMessage } from 'node:http';
import { cgiSpelling } from '../../upstream/fields/hop-by-hop.js';
import { Http2GatewayRequest } from './http2-messages.js';

/**
 * Fields with which a client could make the upstream run something other than what the gateway routed,
 * authenticated and counted: frameworks (IIS, Symfony, Zend; Express's method-override, ASP.NET, Google
 * APIs) take the path or the verb from them instead of the request line.
 */
const targetOverrideFields = [
  'x-original-url',
  'x-rewrite-url',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
] as const;
const targetOverrides: ReadonlySet<string> = new Set(targetOverrideFields);

/**
 * Whether the query names a `_method` parameter, with which frameworks take the verb from the query
 * instead of the request line: Symfony (and so Laravel) for a POST, Express's method-override when set
 * up so. Names are read as PHP reads them: percent-decoded, `+` as a space, leading spaces dropped,
 * spaces and dots as `_`, and `_method[…]` as `_method`.
 */
function overridesMethod(query: string): boolean {
  // Most queries name no such parameter in any spelling: only those with `ethod` or an escape are read.
  if (!/ethod|%/i.test(query)) return false;
  for (const pair of query.slice(1).split('&')) {
    const raw = pair.split('=', 1)[0]!.replaceAll('+', ' ');
    let name: string;
    try {
      name = decodeURIComponent(raw);
    } catch {
      name = raw;
    }
    name = name.trimStart().replace(/\[.*$/s, '').replace(/[ .]/g, '_').toLowerCase();
    if (name === '_method') return true;
  }
  return false;
}

/**
 * Why a request must be refused (400) before it is routed, or null. Node's parser has already refused
 * malformed framing (Content-Length with Transfer-Encoding, two Content-Lengths, a Transfer-Encoding not
 * ending in chunked); what it lets through and is checked here:
 * - several Host lines (RFC 9112 §3.2: 400), which the data plane joins with a comma;
 * - Transfer-Encoding on HTTP/1.0 (RFC 9112 §6.1: faulty framing), or with a coding besides `chunked`;
 * - a target-override field (`targetOverrideFields`), in any spelling a CGI-style upstream reads as one;
 * - a `_method` parameter in the query (`query`, with its `?`).
 */
export function screeningProblem(req: IncomingMessage, query: string): string | null {
  if (req instanceof Http2GatewayRequest && req.problem) return req.problem;
  const { headers } = req;
  if (headers.host?.includes(',')) return 'more than one Host';
  const transferEncoding = headers['transfer-encoding'];
  if (transferEncoding !== undefined) {
    if (req.httpVersionMinor === 0 && req.httpVersionMajor === 1) return 'Transfer-Encoding on HTTP/1.0';
    // `gzip, chunked` and the like: a coding stacks read differently (a classic smuggling vector), which
    // the gateway would have to re-encode; every client sends plain `chunked`.
    if (transferEncoding.trim().toLowerCase() !== 'chunked') return 'a transfer coding other than chunked';
  }
  for (const name in headers) {
    if (targetOverrides.has(cgiSpelling(name))) return `${name} would override the routed target`;
  }
  if (query !== '' && overridesMethod(query)) return 'a _method parameter would override the verb';
  return null;
}

/**
 * Whether the request announced a body (Node has refused a malformed Content-Length already). An HTTP/2
 * request has one unless its HEADERS ended the stream, with or without a `content-length`.
 */
export function announcesBody(req: IncomingMessage): boolean {
  if (req instanceof Http2GatewayRequest) return !req.stream.endAfterHeaders;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
