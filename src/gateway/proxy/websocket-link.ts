import type { Socket } from 'node:net';
import { closeFrame, FrameBoundaries } from './websocket-frames.js';

/** Why the gateway ended a WebSocket, for the access line. */
export type WebSocketEnd = 'quota' | 'revoked' | 'shutdown' | 'protocol_error';

/** Where a link adds the frame bytes it relays: the exchange of the upgrade request. */
export interface RelayedBytes {
  /** Bytes from the client to the upstream. */
  bytesIn: number;
  /** Bytes from the upstream to the client. */
  bytesOut: number;
}

/**
 * An open WebSocket between a client and an upstream, as http-proxy-3's `ws()` pipes it: the frame bytes
 * of each direction counted as they pass, their frame boundaries followed, so that the gateway can end
 * the connection cleanly (RFC 6455 §7.1.2: a close frame, then the TCP connection) when a quota, a
 * revoked key or a shutdown says so, and cut off a side that breaks the protocol.
 */
export class WebSocketLink {
  private readonly fromClient = new FrameBoundaries(true);
  private readonly fromUpstream = new FrameBoundaries(false);
  /** Why the gateway ended it; null while open, or when a side closed it. */
  endedBy: WebSocketEnd | null = null;

  constructor(
    private readonly bytes: RelayedBytes,
    private readonly client: Socket,
    private readonly upstream: Socket,
  ) {
    // In front of the pipes http-proxy-3 has made, before any byte flowed: each chunk is read here
    // before it is relayed (websocket-relay.ts).
    client.prependListener('data', (chunk: Buffer) => {
      bytes.bytesIn += chunk.length;
      const problem = this.fromClient.read(chunk);
      // The upstream goes first: the chunk that broke the protocol is not relayed to it.
      if (problem) this.end(problem.code, problem.reason, 'protocol_error', 'upstream');
    });
    upstream.prependListener('data', (chunk: Buffer) => {
      bytes.bytesOut += chunk.length;
      const problem = this.fromUpstream.read(chunk);
      if (problem) this.end(problem.code, problem.reason, 'protocol_error', 'client');
    });
  }

  /**
   * Ends the connection on both sides: each gets a close frame with `code` and `reason` where the bytes
   * sent to it so far end on a frame boundary, and its socket closes once the frame is written; a side
   * that is in the middle of a frame, or `cut`, is cut off at once.
   */
  end(code: number, reason: string, why: WebSocketEnd, cut?: 'client' | 'upstream'): void {
    if (this.endedBy !== null) return;
    this.endedBy = why;
    this.upstream.unpipe(this.client);
    this.client.unpipe(this.upstream);
    close(this.upstream, cut !== 'upstream' && this.fromClient.atBoundary, code, reason, true);
    close(this.client, cut !== 'client' && this.fromUpstream.atBoundary, code, reason, false);
  }
}

function close(socket: Socket, cleanly: boolean, code: number, reason: string, masked: boolean): void {
  if (!cleanly || !socket.writable) {
    socket.destroy();
    return;
  }
  socket.write(closeFrame(code, reason, masked));
  socket.destroySoon();
}
