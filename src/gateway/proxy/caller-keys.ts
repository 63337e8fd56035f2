import type { IncomingMessage } from 'node:http';
import { isIPv6 } from 'node:net';
import { clientAddress } from './forwarded-headers.js';
import type { TrustedPeers } from './trust-proxy.js';

/**
 * The caller a restriction counted `by` caller counts this request for (see docs/quotas.md):
 * - `client`: the client address as the access log decides it (the socket's, or the X-Forwarded-For
 *   client when the peer is trusted), an IPv6 address by its /64, the block one subscriber is given
 *   (RFC 6177), so that one host cannot spread itself over its own network's addresses;
 * - `header:<name>`: the request's value of that header, or its client address without one.
 * The two kinds never meet: a header value `client 1.2.3.4` is not the client 1.2.3.4.
 */
export function callerOf(req: IncomingMessage, by: string, trusted: TrustedPeers): string {
  if (by !== 'client') {
    const values = req.headersDistinct[by.slice('header:'.length)];
    if (values !== undefined) return `value ${values.join(',')}`;
  }
  return `client ${addressBlock(clientAddress(req, trusted))}`;
}

/** An IPv4 address as it is, an IPv6 address as its /64 prefix: `2001:db8:0:1::/64`. */
export function addressBlock(address: string): string {
  if (!isIPv6(address)) return address;
  const [head = '', tail] = address.split('::');
  const groupsOf = (part: string) =>
    part === '' ? [] : part.split(':').flatMap((group) => (group.includes('.') ? ['0', '0'] : [group]));
  const [first, last] = [groupsOf(head), tail === undefined ? [] : groupsOf(tail)];
  const groups = [...first, ...Array<string>(8 - first.length - last.length).fill('0'), ...last];
  return `${groups
    .slice(0, 4)
    .map((group) => parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}
