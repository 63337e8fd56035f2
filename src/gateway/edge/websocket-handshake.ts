import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { announcesBody } from './request-screening.js';

/** Why an upgrade request is refused (400) before it is routed, and the fields that say more. */
export interface UpgradeProblem {
  detail: string;
  fields: readonly string[];
}

/** RFC 6455 §4.1: the key is 16 random bytes in base64, 24 characters ending in `==`. */
const webSocketKey = /^[A-Za-z0-9+/]{21}[AQgw]==$/;
/** RFC 6455 §4.4: the version this gateway relays, sent back when a client asks for another. */
const webSocketVersion = '13';

/** Whether the request asks to become a WebSocket (one `Upgrade` token, `websocket`, in any case). */
export function asksForWebSocket(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  return upgrade !== undefined && upgrade.trim().toLowerCase() === 'websocket';
}

/**
 * Why a request that came with `Connection: upgrade` cannot go on, or null. Another protocol than
 * WebSocket (`h2c`) is ignored as RFC 9110 §7.8 lets a server do, and the request answered as any other,
 * but not with a body: Node hands its bytes over unread, as the new protocol's. A WebSocket opening
 * handshake must be what RFC 6455 §4.2.1 asks: a GET of HTTP/1.1, one `Upgrade: websocket` (two lines
 * are joined and refused), a 16-byte `Sec-WebSocket-Key`, `Sec-WebSocket-Version: 13`, and no body.
 */
export function upgradeProblem(req: IncomingMessage, webSocket: boolean): UpgradeProblem | null {
  const none: readonly string[] = [];
  if (!webSocket) {
    if (req.headers.upgrade?.toLowerCase().includes('websocket'))
      return { detail: 'Upgrade must name websocket once, alone', fields: none };
    return announcesBody(req)
      ? { detail: 'a request that asks to switch protocols cannot carry a body', fields: none }
      : null;
  }
  if (req.method !== 'GET') return { detail: 'a WebSocket opens with a GET', fields: none };
  if (req.httpVersionMajor !== 1 || req.httpVersionMinor < 1)
    return { detail: 'a WebSocket opens over HTTP/1.1', fields: none };
  if (announcesBody(req)) return { detail: 'a WebSocket opening carries no body', fields: none };
  if (req.headers['sec-websocket-version'] !== webSocketVersion)
    return {
      detail: `Sec-WebSocket-Version must be ${webSocketVersion}`,
      fields: ['sec-websocket-version', webSocketVersion],
    };
  const key = req.headers['sec-websocket-key'];
  if (key === undefined || !webSocketKey.test(key.trim()))
    return { detail: 'Sec-WebSocket-Key must be 16 bytes in base64', fields: none };
  return null;
}

function destroyOnError(this: Socket): void {
  this.destroy();
}

function closeWhenAnswered(this: ServerResponse): void {
  this.socket?.destroySoon();
}

/**
 * The response of a request that came through the server's 'upgrade' event, written on its socket as
 * any answer of the pipeline is: the gateway's refusal (or the answer to a protocol it does not switch
 * to) is an ordinary HTTP answer, after which the connection closes, so that no byte that followed the
 * request on it is ever read as another. Its 'close' comes when the socket closes: for a WebSocket, when
 * the connection ends.
 */
export function responseOnSocket(req: IncomingMessage, socket: Socket): ServerResponse {
  // Node no longer listens for the socket's errors once it has handed it over.
  socket.on('error', destroyOnError);
  const res = new ServerResponse(req);
  res.assignSocket(socket);
  // Node then writes `Connection: close` itself.
  res.shouldKeepAlive = false;
  res.on('finish', closeWhenAnswered);
  return res;
}
