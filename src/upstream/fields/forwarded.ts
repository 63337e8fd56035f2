import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { isIP } from 'node:net';
import type { forwardedFields } from '../../kit/gateway-owned-fields.js';
import { namedInConnection } from './hop-by-hop.js';
import { plainAddress, type TrustedPeers } from './trust-proxy.js';

/** Where the address of a request's peer is kept, from its arrival on. */
const peerKey = Symbol('quotagate.peer');
type NotedPeer = IncomingMessage & { [peerKey]?: string };

/**
 * Notes the address of the peer `req` came from, as it arrives, for the rest of its exchange: its socket
 * may be gone by the time the exchange is logged (an HTTP/2 stream's, a refused upgrade's, a client's
 * that left), and then says no address.
 */
export function notePeer(req: IncomingMessage): void {
  (req as NotedPeer)[peerKey] = plainAddress(req.socket.remoteAddress ?? '');
}

/** The address of the peer `req` came from: as noted at its arrival, else as its socket says now. */
export function peerAddress(req: IncomingMessage): string {
  return (req as NotedPeer)[peerKey] ?? plainAddress(req.socket.remoteAddress ?? '');
}

/**
 * Appends X-Forwarded-For/-Proto/-Host for the upstream request to `fields` (name, value pairs), from
 * `req`'s socket. A trusted peer's values are kept and extended; anyone else's are replaced, so clients
 * cannot pose as other addresses (their `Forwarded` header, RFC 7239, and the other
 * `peerIdentityFields` must not go upstream either).
 */
export function appendForwardedFields(
  req: IncomingMessage,
  fields: Array<string | string[]>,
  peerTrusted: boolean,
): void {
  const peer = peerAddress(req);
  const proto = (req.socket as Partial<TLSSocket>).encrypted === true ? 'https' : 'http';
  const host = req.headers.host ?? '';
  if (!peerTrusted) {
    fields.push('x-forwarded-for', peer, 'x-forwarded-proto', proto, 'x-forwarded-host', host);
    return;
  }
  // A field the trusted peer named in Connection was for this hop only.
  const hopOnly = namedInConnection(req.headers);
  const sent = (name: (typeof forwardedFields)[number]) =>
    hopOnly.has(name) ? undefined : (req.headers[name] as string | undefined);
  const chain = sent('x-forwarded-for');
  fields.push(
    'x-forwarded-for',
    chain ? `${chain}, ${peer}` : peer,
    'x-forwarded-proto',
    sent('x-forwarded-proto') ?? proto,
    'x-forwarded-host',
    sent('x-forwarded-host') ?? host,
  );
}

/**
 * The client's address, for the access log: the socket peer, or, when the peer is trusted, the rightmost
 * address of the X-Forwarded-For it sent that no trusted peer added (each proxy appends the peer it saw,
 * so addresses left of the first untrusted one may be anything the client wrote).
 */
export function clientAddress(req: IncomingMessage, trusted: TrustedPeers): string {
  let client = peerAddress(req);
  if (!trusted.trusts(client)) return client;
  // As the client sent it: req.headers may hold the upstream's copy, with the peer appended.
  const chain = (req.headersDistinct['x-forwarded-for'] ?? []).join(',').split(',');
  for (let i = chain.length - 1; i >= 0; i -= 1) {
    const hop = plainAddress(chain[i]!.trim());
    if (!isIP(hop)) break;
    client = hop;
    if (!trusted.trusts(hop)) break;
  }
  return client;
}
