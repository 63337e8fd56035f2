import type { IncomingMessage } from 'node:http';
import { isIPv6 } from 'node:net';
import { clientAddress } from './forwarded.js';
import { namedInConnection } from './hop-by-hop.js';
import type { TrustedPeers } from './trust-proxy.js';

/**
 * The caller a restriction counted `by` caller counts this request for (see docs/quotas.md):
 * - `client`: the client address as the access log decides it (the socket's, or the X-Forwarded-For
 *   client when the peer is trusted), an IPv6 address by its /64, the block one subscriber is given
 *   (RFC 6177), so that one host cannot spread itself over its own network's addresses;
 * - `header:<name>`: the request's value of that header, whitespace around it dropped and letters in
 *   lower case (so that `ACME` and `acme`, which an upstream may take for one tenant, are one count), or
 *   its client address when the value is empty or the header absent. A header sent in more than one
 *   field line names no one caller: the gateway refuses it first (`repeatedCallerField`). A header the
 *   request's `Connection` names is hop-by-hop (RFC 9110 §7.6.1): it never reaches the upstream, so the
 *   request is counted as one without it.
 * The two kinds never meet: a header value `client 1.2.3.4` is not the client 1.2.3.4.
 */
export function callerOf(req: IncomingMessage, by: string, trusted: TrustedPeers): string {
  if (by !== 'client') {
    const name = by.slice('header:'.length);
    const value = req.headersDistinct[name]?.[0]?.trim().toLowerCase();
    if (value && !namedInConnection(req.headers).has(name)) return `value ${value}`;
  }
  return `client ${addressBlock(clientAddress(req, trusted))}`;
}

/**
 * The header names (lower case) that `restrictions` count by: any other spelling of them that a CGI-style
 * upstream reads as the same field (`x_tenant` for `x-tenant`) is dropped on the way upstream.
 */
export function countedFields(restrictions: ReadonlyArray<{ by: string | undefined }>): string[] {
  const fields: string[] = [];
  for (const { by } of restrictions)
    if (by !== undefined && by !== 'client') fields.push(by.slice('header:'.length));
  return fields;
}

/**
 * The first header, of those `restrictions` count by, that the request sends in more than one field
 * line, or undefined. Joined, its values would name a new caller for every value a client adds; taking
 * the first or the last would let a client put its own before or after the one a proxy set. So such a
 * request names no caller, and is refused.
 */
export function repeatedCallerField(
  req: IncomingMessage,
  restrictions: ReadonlyArray<{ by: string | undefined }>,
): string | undefined {
  for (const name of countedFields(restrictions)) {
    // Named by Connection, the field is counted as absent however many lines it has.
    if ((req.headersDistinct[name]?.length ?? 0) > 1 && !namedInConnection(req.headers).has(name))
      return name;
  }
  return undefined;
}

/**
 * An IPv4 address as it is; an IPv6 address as its /64 prefix, `2001:db8:0:1::/64`, however it is
 * spelled (letter case, leading zeros, `::`, a zone); an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`,
 * RFC 4291 §2.5.5.2, in any spelling) as the IPv4 address it maps, so that a dual-stack socket or a
 * proxy that writes it so cannot make all IPv4 clients one, nor one client two.
 */
export function addressBlock(address: string): string {
  if (!isIPv6(address)) return address;
  const groups = ipv6Groups(address);
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) {
    const [high = 0, low = 0] = groups.slice(6);
    return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  }
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (`isIPv6`), its zone dropped. */
function ipv6Groups(address: string): number[] {
  const [head = '', tail] = address.split('%')[0]!.split('::');
  const groupsOf = (part: string) =>
    part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [parseInt(group, 16)];
          const [a = 0, b = 0, c = 0, d = 0] = group.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const [first, last] = [groupsOf(head), tail === undefined ? [] : groupsOf(tail)];
  return [...first, ...Array<number>(8 - first.length - last.length).fill(0), ...last];
}
