import { framingFields, hopByHopFields } from '../../kit/gateway-owned-fields.js';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';

/**
 * A field name as CGI-style upstreams (WSGI, Rack, PHP) read it: they name fields `HTTP_<NAME>` with `-`
 * and `_` alike as `_`, so `X_Original_URL` is `X-Original-URL` to them.
 */
export const cgiSpelling = (name: string): string => (name.includes('_') ? name.replaceAll('_', '-') : name);

const hopByHop: ReadonlySet<string> = new Set(hopByHopFields);

// The framing fields are never hop-by-hop, whatever `Connection` says: dropping Content-Length because a
// client named it would send the body upstream unframed, where it is read as a second request (request
// smuggling).
const framing: ReadonlySet<string> = new Set(framingFields);

const noNames: ReadonlySet<string> = new Set();
/** `Connection` values that name no field, as clients and upstreams usually spell them. */
const connectionOptions: ReadonlySet<string> = new Set(['keep-alive', 'close', 'Keep-Alive', 'Close']);

/** The field names a message's `Connection` names (lower case): hop-by-hop for this connection only. */
export function namedInConnection(headers: IncomingHttpHeaders): ReadonlySet<string> {
  // Several Connection lines of an upstream answer come as a list.
  const value = headers.connection as string | string[] | undefined;
  // Most messages carry none, or one of the options that names no field.
  if (value === undefined || connectionOptions.has(value as string)) return noNames;
  const names = new Set<string>();
  for (const name of (typeof value === 'string' ? value : value.join(',')).split(',')) {
    const trimmed = name.trim().toLowerCase();
    if (trimmed) names.add(trimmed);
  }
  return names;
}

/** A Content-Length as the number Node framed the body by: `0100` is 64 to an upstream that reads octal. */
const withoutLeadingZeros = (length: string): string =>
  length.length > 1 && length.charCodeAt(0) === 0x30 ? length.replace(/^0+(?=\d)/, '') : length;

/**
 * Appends the request's end-to-end fields to `fields` (name, value pairs, as undici takes them in a
 * list), without hop-by-hop fields, without `drop` (the fields the gateway drops, and those it sets
 * itself), without any underscore spelling of a field in `owned` (the fields the gateway sets, drops
 * or frames by), and without any other spelling of a field in `counted` (those a quota counted the
 * request by). The body goes upstream framed as it was received: a Content-Length stays (without
 * leading zeros), whatever `Connection` says, and undici frames it by that; a chunked body (its
 * Transfer-Encoding is hop-by-hop, and nothing but `chunked` gets this far) is chunked again.
 */
export function appendEndToEndRequestFields(
  headers: IncomingHttpHeaders,
  drop: ReadonlySet<string>,
  owned: ReadonlySet<string>,
  fields: Array<string | string[]>,
  counted: readonly string[] = noFields,
): void {
  const named = namedInConnection(headers);
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || drop.has(name)) continue;
    if (hopByHop.has(name) || (named.has(name) && !framing.has(name))) continue;
    // CGI-style upstreams read `X_Forwarded_For` as `X-Forwarded-For`: such a spelling of a field the
    // gateway sets, drops or frames by never goes upstream, from any peer.
    if (name.includes('_') && owned.has(cgiSpelling(name))) continue;
    // Nor may another spelling of a counted field (`X_Tenant` for `X-Tenant`) name another caller there.
    if (counted.length > 0 && isOtherSpellingOf(name, counted)) continue;
    fields.push(name, name === 'content-length' ? withoutLeadingZeros(value as string) : value);
  }
}

const noFields: readonly string[] = [];

/** Whether `name` is not one of `fields` but a CGI-style upstream reads it as one (`x_tenant`, `x-tenant`). */
function isOtherSpellingOf(name: string, fields: readonly string[]): boolean {
  const read = cgiSpelling(name);
  return fields.some((field) => field !== name && cgiSpelling(field) === read);
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

/** `trailers` among the codings of a TE value (RFC 9110 §10.1.4), parameters and case aside. */
const trailersCoding = /(?:^|,)[ \t]*trailers[ \t]*(?:[;,]|$)/i;

/**
 * Whether the client takes trailer fields: every HTTP/2 client (RFC 9113 §8.1), and an HTTP/1.1 client
 * that says so with `TE: trailers` (RFC 9110 §6.5.1: a sender may not count on a recipient that did not
 * to keep them).
 */
export function takesTrailers(req: IncomingMessage): boolean {
  if (req.httpVersionMajor === 2) return true;
  const te = req.headers.te;
  return typeof te === 'string' && trailersCoding.test(te);
}

/**
 * Makes the response head `fields` announce the upstream's `Trailer` and frame the body without a
 * Content-Length, so that an HTTP/1.1 answer is chunked and its trailer section can follow the body.
 */
export function announceTrailers(fields: Array<string | string[]>, trailer: string | string[]): void {
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i] === 'content-length') {
      fields.splice(i, 2);
      break;
    }
  }
  fields.push('trailer', trailer);
}

/**
 * The upstream's trailer fields a client may be given: none that is hop-by-hop, frames the message or
 * names its target (RFC 9110 §6.5.1), nor one `Connection` named; null when none is left.
 */
export function endToEndTrailers(
  trailers: IncomingHttpHeaders,
  named: ReadonlySet<string>,
): OutgoingHttpHeaders | null {
  let kept: OutgoingHttpHeaders | null = null;
  for (const name in trailers) {
    const value = trailers[name];
    if (value === undefined || hopByHop.has(name) || framing.has(name) || named.has(name)) continue;
    (kept ??= {})[name] = value;
  }
  return kept;
}
