import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Clock } from '../../kit/clock.js';
import type { ByteMeter } from '../byte-meter.js';
import { answersPing, closeFrame, FrameBoundaries, pingFrame, type FrameProblem } from './frames.js';

/** Why the gateway ended a WebSocket, for the access line. */
export type WebSocketEnd = 'quota' | 'revoked' | 'expired' | 'shutdown' | 'protocol_error' | 'ping_timeout';

/** Where a link adds the frame bytes it relays: the exchange of the upgrade request. */
export interface RelayedBytes {
  /** Bytes from the client to the upstream. */
  bytesIn: number;
  /** Bytes from the upstream to the client. */
  bytesOut: number;
  /** Told after each count grew, while an enforced byte restriction counts them. */
  readonly meter: ByteMeter | null;
}

/** How the gateway keeps its open WebSockets in check (`server.webSocket*`). */
export interface WebSocketLimits {
  /** Milliseconds between two pings to a client; one that sends nothing back within the next is gone. */
  pingIntervalMs: number;
  /** The largest frame payload relayed, in bytes: a larger frame ends the connection with 1009. */
  maxFrameBytes: number;
  timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
}

/**
 * An open WebSocket between a client and an upstream, relayed by the gateway from the moment it opened
 * (websocket/relay.ts): the frame bytes of each direction are counted and their frame boundaries
 * followed as they pass, their payloads never copied. At those boundaries the gateway can speak for
 * itself: it ends the connection cleanly (RFC 6455 §7.1.2: a close frame, then the TCP connection) when
 * a quota, a revoked key, a shutdown or a broken protocol says so, and it pings the client, so that a
 * client gone without a word (no FIN, no RST) is found out within two intervals. The client's pong to
 * the gateway's ping is the gateway's: it is taken out of the bytes relayed upstream.
 */
export class WebSocketLink {
  private readonly fromClient: FrameBoundaries;
  private readonly fromUpstream: FrameBoundaries;
  /** Why the gateway ended it; null while open, or when a side closed it. */
  endedBy: WebSocketEnd | null = null;
  /** Whether the bytes relayed to each side so far end on a frame boundary. */
  private upstreamAtBoundary = true;
  private clientAtBoundary = true;
  /** This link's ping payload: a pong that carries it answers the gateway, not the upstream. */
  private readonly pingPayload = randomBytes(8);
  private pingTimer: unknown = null;
  /** A ping is due while the upstream is in the middle of a frame: it goes at the frame's end. */
  private pingDue = false;
  /** A ping went out, and the client has sent nothing since. */
  private unanswered = false;
  /** The bytes of a client's pong read so far, held back until it is whole and known to be whose. */
  private pong: Buffer[] | null = null;
  /** Charges of its bytes the link waits for: neither side is read until none is left. */
  private heldForCharges = 0;

  constructor(
    private readonly bytes: RelayedBytes,
    private readonly client: Socket,
    private readonly upstream: Socket,
    private readonly limits: WebSocketLimits,
  ) {
    this.fromClient = new FrameBoundaries(true, limits.maxFrameBytes);
    this.fromUpstream = new FrameBoundaries(false, limits.maxFrameBytes);
    client.on('data', (chunk: Buffer) => this.clientSent(chunk));
    upstream.on('data', (chunk: Buffer) => this.upstreamSent(chunk));
    // As a pipe does: a side's end of its stream ends the other's, and a side that cannot take more
    // holds the other back until it drains.
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('drain', () => {
      if (this.heldForCharges === 0) upstream.resume();
    });
    upstream.on('drain', () => {
      if (this.heldForCharges === 0) client.resume();
    });
    client.once('close', () => this.stopPinging());
    this.pingTimer = limits.timers.setTimeout(this.pingTick, limits.pingIntervalMs);
    client.resume();
    upstream.resume();
  }

  /**
   * Ends the connection on both sides: each gets a close frame with `code` and `reason` where the bytes
   * relayed to it so far end on a frame boundary, and its socket closes once the frame is written; a
   * side that is in the middle of a frame is cut off at once. Nothing is relayed after it.
   */
  end(code: number, reason: string, why: WebSocketEnd): void {
    if (this.endedBy !== null) return;
    this.endedBy = why;
    this.stopPinging();
    close(this.upstream, this.upstreamAtBoundary, code, reason, true);
    // A client gone without a word reads nothing: its close frame goes only if nothing waits before it.
    const gone = why === 'ping_timeout';
    const cleanly = this.clientAtBoundary && (!gone || this.client.writableLength === 0);
    close(this.client, cleanly, code, reason, false);
    if (gone) this.client.destroy();
  }

  /** Relays a chunk from the client, less a pong to the gateway's ping, which may straddle chunks. */
  private clientSent(chunk: Buffer): void {
    if (this.endedBy !== null) return;
    this.unanswered = false;
    let at = 0;
    let from = 0;
    while (at < chunk.length) {
      if (this.pong !== null) {
        at = this.fromClient.readTo(chunk, at, 'frameEnd');
        if (this.fromClient.problem) return this.broken(this.fromClient.problem);
        this.pong.push(chunk.subarray(from, at));
        from = at;
        if (this.fromClient.atBoundary) this.pongRead();
        continue;
      }
      at = this.fromClient.readTo(chunk, at, 'pongStart');
      if (this.fromClient.problem) return this.broken(this.fromClient.problem);
      if (!this.fromClient.pongStarted) continue;
      // Relayed up to the pong (a boundary); the pong is held from its first byte on.
      if (at - 1 > from) this.toUpstream(chunk.subarray(from, at - 1), true);
      this.pong = [];
      from = at - 1;
    }
    if (this.pong !== null) this.pong.push(chunk.subarray(from));
    else if (from < chunk.length) this.toUpstream(chunk.subarray(from), this.fromClient.atBoundary);
  }

  /** A whole pong of the client's: the gateway's own is dropped, any other relayed as it came. */
  private pongRead(): void {
    const frame = Buffer.concat(this.pong!);
    this.pong = null;
    if (!answersPing(frame, this.pingPayload)) this.toUpstream(frame, true);
  }

  /** Relays a chunk from the upstream, with the gateway's ping after the frame it was due in. */
  private upstreamSent(chunk: Buffer): void {
    if (this.endedBy !== null) return;
    let from = 0;
    if (this.pingDue) {
      from = this.fromUpstream.readTo(chunk, 0, 'frameEnd');
      if (this.fromUpstream.problem) return this.broken(this.fromUpstream.problem);
      this.toClient(chunk.subarray(0, from), this.fromUpstream.atBoundary);
      if (!this.fromUpstream.atBoundary) return;
      this.ping();
      if (from === chunk.length) return;
    }
    this.fromUpstream.readTo(chunk, from, 'chunkEnd');
    if (this.fromUpstream.problem) return this.broken(this.fromUpstream.problem);
    this.toClient(from === 0 ? chunk : chunk.subarray(from), this.fromUpstream.atBoundary);
  }

  private toUpstream(bytes: Buffer, atBoundary: boolean): void {
    if (!this.upstream.writable) return;
    this.bytes.bytesIn += bytes.length;
    this.upstreamAtBoundary = atBoundary;
    if (!this.upstream.write(bytes)) this.client.pause();
    if (this.bytes.meter !== null) this.metered(this.bytes.meter);
  }

  private toClient(bytes: Buffer, atBoundary: boolean): void {
    if (!this.client.writable) return;
    this.bytes.bytesOut += bytes.length;
    this.clientAtBoundary = atBoundary;
    if (!this.client.write(bytes)) this.upstream.pause();
    if (this.bytes.meter !== null) this.metered(this.bytes.meter);
  }

  /**
   * Tells the meter of the bytes just relayed. A charge they set off that waits for the store holds
   * both sides (neither is read) until it is decided; a refusal ends the link through the exchange.
   */
  private metered(meter: ByteMeter): void {
    const flows = meter.moved();
    if (typeof flows === 'boolean') return;
    this.heldForCharges += 1;
    this.client.pause();
    this.upstream.pause();
    void flows.then(() => {
      this.heldForCharges -= 1;
      if (this.heldForCharges > 0 || this.endedBy !== null) return;
      if (!this.upstream.writableNeedDrain) this.client.resume();
      if (!this.client.writableNeedDrain) this.upstream.resume();
    });
  }

  /**
   * A side broke the protocol: the chunk that did is not relayed, and both sides get the close code
   * (RFC 6455 §7.4.1) where they can.
   */
  private broken(problem: FrameProblem): void {
    this.end(problem.code, problem.reason, 'protocol_error');
  }

  /**
   * Every `pingIntervalMs`: a client that has sent nothing since the last ping is gone (unless the
   * gateway itself stopped reading it, its upstream being full), else it is pinged again.
   */
  private readonly pingTick = (): void => {
    this.pingTimer = this.limits.timers.setTimeout(this.pingTick, this.limits.pingIntervalMs);
    if (this.unanswered && !this.upstream.writableNeedDrain) {
      this.end(1001, 'no answer to ping', 'ping_timeout');
      return;
    }
    if (this.clientAtBoundary) this.ping();
    else this.pingDue = true;
  };

  private ping(): void {
    this.pingDue = false;
    this.unanswered = true;
    if (this.client.writable) this.client.write(pingFrame(this.pingPayload));
  }

  private stopPinging(): void {
    if (this.pingTimer === null) return;
    this.limits.timers.clearTimeout(this.pingTimer);
    this.pingTimer = null;
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
