import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { TLSSocket } from 'node:tls';
import { plainAddress } from './trust-proxy.js';

/**
 * Sets X-Forwarded-For/-Proto/-Host of `headers` (going upstream) from `req`'s socket. A trusted peer's
 * values are kept and extended; anyone else's are replaced, so clients cannot pose as other addresses
 * (their `Forwarded` header, RFC 7239, must not be copied into `headers` either).
 */
export function applyForwardedHeaders(
  req: IncomingMessage,
  headers: IncomingHttpHeaders,
  peerTrusted: boolean,
): void {
  const peer = plainAddress(req.socket.remoteAddress ?? '');
  const proto = req.socket instanceof TLSSocket ? 'https' : 'http';
  if (peerTrusted) {
    const chain = headers['x-forwarded-for'];
    headers['x-forwarded-for'] = chain ? `${chain}, ${peer}` : peer;
    headers['x-forwarded-proto'] ??= proto;
    headers['x-forwarded-host'] ??= headers.host ?? '';
    return;
  }
  headers['x-forwarded-for'] = peer;
  headers['x-forwarded-proto'] = proto;
  headers['x-forwarded-host'] = headers.host ?? '';
}
