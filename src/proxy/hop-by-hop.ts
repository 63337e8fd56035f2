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
 * The request's end-to-end fields as a new object, without hop-by-hop fields and without `drop`.
 * `transfer-encoding` stays: Node frames the upstream request by it and re-encodes the body itself. A
 * copy rather than deletes in place: objects that lose properties turn slow for every later copy.
 */
export function endToEndRequestHeaders(
  headers: IncomingHttpHeaders,
  drop: ReadonlySet<string>,
): IncomingHttpHeaders {
  const named = namedInConnection(headers);
  const result: IncomingHttpHeaders = {};
  for (const name in headers) {
    if (drop.has(name) || (name !== 'transfer-encoding' && (hopByHop.has(name) || named.has(name)))) continue;
    result[name] = headers[name];
  }
  return result;
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
