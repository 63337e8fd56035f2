import { cgiSpelling } from '../request-screening.js';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';

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

// RFC 9112 §6: the fields that frame a message body, and the one that names its target. They are never
// hop-by-hop, whatever `Connection` says: dropping Content-Length because a client named it would send
// the body upstream unframed, where it is read as a second request (request smuggling).
const framing = new Set(['content-length', 'transfer-encoding', 'host']);

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
 * The request's end-to-end fields as a new object, without hop-by-hop fields, without `drop`, and without
 * any underscore spelling of a field in `owned` (the fields the gateway sets, drops or frames by). The
 * framing fields stay: Node frames the upstream request by them (a chunked body is re-encoded), so the
 * body goes upstream framed exactly as it was received, or not at all. A copy rather than deletes in
 * place: objects that lose properties turn slow for every later copy.
 */
export function endToEndRequestHeaders(
  headers: IncomingHttpHeaders,
  drop: ReadonlySet<string>,
  owned: ReadonlySet<string>,
): IncomingHttpHeaders {
  const named = namedInConnection(headers);
  const result: IncomingHttpHeaders = {};
  for (const name in headers) {
    if (drop.has(name) || (!framing.has(name) && (hopByHop.has(name) || named.has(name)))) continue;
    // CGI-style upstreams read `X_Forwarded_For` as `X-Forwarded-For`: such a spelling of a field the
    // gateway sets, drops or frames by never goes upstream, from any peer.
    if (name.includes('_') && owned.has(cgiSpelling(name))) continue;
    result[name] = headers[name];
  }
  return result;
}

/** The fields this module handles: the hop-by-hop and framing ones. */
export const hopByHopAndFramingFields: readonly string[] = [...hopByHop, ...framing];

/**
 * Appends the end-to-end fields of an upstream response to `fields` (name, value pairs, as
 * `res.writeHead` takes them) and returns it. Fields already in `fields`, or already set on `existing`,
 * keep their value: the gateway's own win over the upstream's. `Transfer-Encoding` goes (Node chunks a
 * body without Content-Length itself); `Content-Length` stays even when `Connection` names it.
 */
export function appendEndToEndResponseFields(
  headers: IncomingHttpHeaders,
  fields: Array<string | string[]>,
  existing: ServerResponse | null,
): Array<string | string[]> {
  const dropped = namedInConnection(headers);
  const gatewayCount = fields.length;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || hopByHop.has(name) || (dropped.has(name) && !framing.has(name))) continue;
    if (gatewayCount > 0 && setAt(fields, gatewayCount, name)) continue;
    if (existing?.hasHeader(name)) continue;
    fields.push(name, value);
  }
  return fields;
}

/** Whether the first `count` entries of a name, value list name `name` (lower case). */
function setAt(fields: ReadonlyArray<string | string[]>, count: number, name: string): boolean {
  for (let i = 0; i < count; i += 2) if (fields[i] === name) return true;
  return false;
}
