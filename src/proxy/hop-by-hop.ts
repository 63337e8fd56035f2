import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

// RFC 9110 §7.6.1: connection-specific fields, plus the obsolete ones proxies still meet in practice.
const hopByHop = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function namedInConnection(headers: IncomingHttpHeaders): Set<string> {
  const value = headers.connection;
  const names = new Set<string>();
  if (typeof value !== 'string') return names;
  for (const name of value.split(',')) {
    const trimmed = name.trim().toLowerCase();
    if (trimmed) names.add(trimmed);
  }
  return names;
}

/**
 * Removes hop-by-hop fields from a request's headers in place. `transfer-encoding` stays: Node frames the
 * upstream request by it and re-encodes the body itself.
 */
export function stripRequestHopByHop(headers: IncomingHttpHeaders): void {
  for (const name of namedInConnection(headers)) {
    if (name !== 'transfer-encoding') delete headers[name];
  }
  for (const name of hopByHop) {
    if (name !== 'transfer-encoding') delete headers[name];
  }
}

/** The end-to-end fields of an upstream response, ready for `res.setHeader`. */
export function endToEndResponseHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const dropped = namedInConnection(headers);
  const result: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !hopByHop.has(name) && !dropped.has(name)) result[name] = value;
  }
  return result;
}
