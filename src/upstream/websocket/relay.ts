import type { ClientRequest, IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { ProxyServer } from 'http-proxy-3';

/** What the gateway does at each step of a WebSocket opening that http-proxy-3's `ws()` runs. */
export interface WebSocketSteps {
  /** The upstream request is made, not yet sent: `req` is the client's. */
  requested(proxyReq: ClientRequest, req: IncomingMessage): void;
  /**
   * The upstream answered 101: its fields (`proxyRes.headers`) may still change, for the client is sent
   * them after this. A step that destroys `upstream` ends the opening.
   */
  switching(req: IncomingMessage, proxyRes: IncomingMessage, upstream: Socket): void;
  /**
   * The 101 is on its way to the client, and the sockets are the step's to relay: paused, with no
   * reader, and not a byte relayed yet either way. The bytes that came with the 101 wait in
   * `upstream`, those that came behind the client's handshake in `client`.
   */
  opened(req: IncomingMessage, client: Socket, upstream: Socket): void;
  /** The opening failed, or the upstream socket did once open (`req.socket` is the client's). */
  failed(error: Error, req: IncomingMessage): void;
}

/**
 * Opens the WebSocket `req` asks for (through the server's 'upgrade' event, `head` the bytes that came
 * behind its handshake), sending the upstream `headers` rather than the client's.
 */
export type WebSocketOpener = (req: IncomingMessage, head: Buffer, headers: IncomingHttpHeaders) => void;

/** The client's request and socket of each upstream socket that answered 101, until it is open. */
const openings = new WeakMap<Socket, { req: IncomingMessage; client: Socket }>();

/**
 * Follows the WebSocket openings of `server` (an http-proxy-3 server) through `steps`, and returns how
 * to start one. This is the gateway's one coupling with how http-proxy-3 runs an opening (`ws()` and the
 * `stream` pass of lib/http-proxy/passes/ws-incoming.js), and test/upstream/websocket/relay.test.ts
 * checks it against the installed version:
 * - `ws()` makes the upstream request at once from `req.headers`, which may be swapped around the call;
 *   its callback is given the error and the client's request (typed for `web()`);
 * - it emits 'proxyReqWs' with the upstream request made and not sent, so that an 'upgrade' listener
 *   added then runs before its own, which writes the 101 to the client from `proxyRes.headers`;
 * - its own 'upgrade' listener unshifts the bytes that came with the 101 onto the upstream socket,
 *   pipes the sockets both ways and then emits 'open' with the upstream socket, all in one tick: a pipe
 *   starts its flow on the next, so the pipes can be taken apart then with no byte relayed. (A 'data'
 *   listener of the upstream socket added before 'open' would set it flowing, and take the unshifted
 *   bytes alone, before the pipe is there to relay them.) Its other listeners stay: each socket's
 *   'close' ends the other, and an upstream socket's error is told to the callback of `ws()`.
 */
export function followWebSocketOpenings(server: ProxyServer, steps: WebSocketSteps): WebSocketOpener {
  server.on('proxyReqWs', (proxyReq: ClientRequest, req: IncomingMessage, client: Socket) => {
    steps.requested(proxyReq, req);
    proxyReq.on('upgrade', (proxyRes: IncomingMessage, upstream: Socket) => {
      steps.switching(req, proxyRes, upstream);
      if (!upstream.destroyed) openings.set(upstream, { req, client });
    });
  });
  server.on('open', (upstream: Socket) => {
    const opening = openings.get(upstream);
    if (opening === undefined) return;
    openings.delete(upstream);
    // Unpiped, each socket is paused: its bytes wait for the step's reader.
    upstream.unpipe(opening.client);
    opening.client.unpipe(upstream);
    steps.opened(opening.req, opening.client, upstream);
  });
  const failed = (error: Error, req: IncomingMessage): void => steps.failed(error, req);
  return (req, head, headers) => {
    const own = req.headers;
    req.headers = headers;
    try {
      server.ws(req, req.socket, head, failed as never);
    } finally {
      req.headers = own;
    }
  };
}
