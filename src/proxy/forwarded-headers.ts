import type { IncomingMessage } from 'node:http';
import { TLSSocket } from 'node:tls';
import { plainAddress, type TrustedPeers } from './trust-proxy.js';

/**
 * Sets X-Forwarded-For/-Proto/-Host from the socket. A trusted peer's values are kept and extended;
 * anyone else's are replaced, so clients cannot pose as other addresses. `Forwarded` (RFC 7239) is
 * passed on only from trusted peers for the same reason.
 */
export function applyForwardedHeaders(req: IncomingMessage, trusted: TrustedPeers): void {
  const peer = plainAddress(req.socket.remoteAddress ?? '');
  const headers = req.headers;
  const proto = req.socket instanceof TLSSocket ? 'https' : 'http';
  if (trusted.trusts(peer)) {
    const chain = headers['x-forwarded-for'];
    headers['x-forwarded-for'] = chain ? `${chain}, ${peer}` : peer;
    headers['x-forwarded-proto'] ??= proto;
    headers['x-forwarded-host'] ??= headers.host ?? '';
    return;
  }
  delete headers.forwarded;
  headers['x-forwarded-for'] = peer;
  headers['x-forwarded-proto'] = proto;
  headers['x-forwarded-host'] = headers.host ?? '';
}
