import http2, { type ClientHttp2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { buildConnector, errors, type Dispatcher } from 'undici';
import type { Clock } from '../kit/clock.js';
import { Http2Call, StreamRefused, type SessionState } from './http2-call.js';
import type { UpstreamTlsOptions } from './upstream-tls.js';

export { headEndedStream, StreamRefused } from './http2-call.js';

/** The upstream of a gRPC API did not take HTTP/2: its TLS handshake chose another protocol by ALPN. */
class UpstreamNotHttp2 extends Error {
  readonly code = 'UPSTREAM_NOT_HTTP2';
}

/**
 * Whether an exchange failed because its upstream does not speak HTTP/2: TLS without `h2` by ALPN, or
 * bytes that are no HTTP/2 frames after the h2c preface (an HTTP/1.1 server's `400`), which Node's
 * HTTP/2 session calls a protocol error.
 */
export function spokeNoHttp2(error: Error): boolean {
  const { code } = error as NodeJS.ErrnoException;
  return code === 'UPSTREAM_NOT_HTTP2' || code === 'ERR_HTTP2_ERROR';
}

/** What the proxy asks of the connections to one upstream origin: undici's Pool has it too. */
export interface UpstreamDispatcher {
  /** Runs one exchange, told to `handler` as undici tells its handlers. */
  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean;
  /** Closes every connection, and the exchanges still on them. */
  destroy(): Promise<void>;
}

/** Milliseconds a connection with no call is kept for the next one (undici's keep-alive without a hint). */
export const idleSessionMs = 4_000;

/**
 * Calls a connection carries at once at most, below what its upstream's SETTINGS_MAX_CONCURRENT_STREAMS
 * allows: RFC 9113 §6.5.2 asks servers to allow no fewer than 100, so any upstream takes them, and
 * calls past it spread over more connections (more TCP windows, no one lost packet holding back every
 * call of an upstream) rather than wait behind a server's default of "unlimited".
 */
export const streamsPerConnection = 100;

/**
 * Bytes an upstream may send on one stream before the gateway has handed them on: HTTP/2's initial
 * window (RFC 9113 §6.9.2), said here because the connection's window is sized from it.
 */
export const streamWindowBytes = 65_535;
/** Calls `session` carries at once at most: what its upstream's SETTINGS allow, `streamsPerConnection` at most. */
const streamsAllowed = (session: ClientHttp2Session): number =>
  Math.min(session.remoteSettings.maxConcurrentStreams ?? streamsPerConnection, streamsPerConnection);

/**
 * Closes a connection that takes no more calls, and has none. Its socket too: Node's session, closed
 * after a GOAWAY, leaves its socket open for the peer to close.
 */
function dropped(session: ClientHttp2Session, { socket }: Connection): void {
  session.destroy();
  socket.destroy();
}

/** One connection: what its calls know of it, and its socket, which Node may leave open (see `ended`). */
interface Connection extends SessionState {
  readonly socket: Socket;
}

/**
 * The connections to the HTTP/2 upstream of a gRPC API: `http://` is HTTP/2 with prior knowledge (h2c,
 * RFC 9113 §3.3), `https://` is TLS whose ALPN must choose `h2` (§3.2), else the connection fails
 * rather than fall back to HTTP/1.1, where trailers, and so gRPC statuses, are lost.
 *
 * Calls in flight share connections: a call goes on the first connection that carries fewer calls than
 * its upstream's SETTINGS_MAX_CONCURRENT_STREAMS and `streamsPerConnection`, and a connection is opened
 * only when every one is full (one at a time: calls wait for it, and take it once its SETTINGS came).
 * A connection kept with no call is closed after `idleSessionMs`. A call whose client reads slowly
 * never holds back another on its connection: Node's HTTP/2 session gives back the connection's window
 * (WINDOW_UPDATE) as DATA arrives, and a stream's as its reader takes it, so a paused stream is held by
 * its own window alone; and the connection's window is the sum of its streams' windows, so that even
 * streams all paused could not fill it.
 *
 * Node's HTTP/2 client is driven here rather than through undici's, whose HTTP/2 client (7.30.2) ends
 * an answer when its trailers arrive, dropping the messages still waiting in a stream paused for a
 * client that had not taken them yet: the last messages of a call were lost, and the call still ended
 * OK. Here an answer ends only once every byte before its trailers has been handed on.
 */
export class Http2Upstream implements UpstreamDispatcher {
  private readonly connect: buildConnector.connector;
  private readonly target: URL;
  private readonly sessions = new Map<ClientHttp2Session, Connection>();
  /** Calls waiting for a connection with room. */
  private readonly waiting: Http2Call[] = [];
  private connecting = false;
  private calls = 0;
  private destroyed = false;
  /** Milliseconds a new connection has to bring the upstream's SETTINGS, as it has to open. */
  private readonly settingsTimeout: number;

  constructor(
    origin: string,
    connectTimeout: number,
    private readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
    /** The API's `upstream.tls` for an `https://` origin: the servername given here is the one sent. */
    tlsOptions: UpstreamTlsOptions = {},
    /**
     * The host (name and port) TLS's SNI and certificate check take without a servername: `origin`'s
     * own, or the name an address `origin` was resolved from.
     */
    private readonly host = new URL(origin).host,
  ) {
    this.target = new URL(origin);
    this.settingsTimeout = connectTimeout;
    const tls = this.target.protocol === 'https:';
    this.connect = buildConnector({
      ...tlsOptions,
      allowH2: true,
      timeout: connectTimeout,
      // undici's own switch for prior knowledge, absent from its types: the socket is marked `h2`.
      ...(tls ? {} : { useH2c: true }),
    } as buildConnector.BuildOptions);
  }

  /** Calls in flight: sent, or waiting for a connection (least-requests balancing reads it). */
  inFlight(): number {
    return this.calls;
  }

  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    this.calls += 1;
    const call = new Http2Call(options, handler, (ended, session) => this.ended(ended, session));
    handler.onRequestStart?.(call, {});
    if (call.aborted) return true;
    this.waiting.push(call);
    this.place();
    return true;
  }

  async destroy(): Promise<void> {
    this.destroyed = true;
    this.connectFailed(new errors.ClientDestroyedError());
    const closing = [...this.sessions].map(
      ([session, { socket }]) =>
        new Promise<void>((resolve) => {
          session.once('close', () => resolve()).destroy();
          socket.destroy();
        }),
    );
    await Promise.all(closing);
  }

  /** Starts the waiting calls on the connections with room; opens one more when some still wait. */
  private place(): void {
    while (this.waiting.length > 0) {
      const session = this.withRoom();
      if (session === null) break;
      const state = this.sessions.get(session)!;
      if (state.calls === 0) {
        this.timers.clearTimeout(state.idleTimer);
        session.ref();
      }
      state.calls += 1;
      this.waiting.shift()!.start(session, state);
    }
    if (this.waiting.length > 0 && !this.connecting && !this.destroyed) this.openSession();
  }

  /** The first connection that takes a call now, if any. */
  private withRoom(): ClientHttp2Session | null {
    for (const [session, state] of this.sessions) {
      if (!state.ready || state.leaving || session.closed || session.destroyed) continue;
      if (state.calls < streamsAllowed(session)) return session;
    }
    return null;
  }

  /** A call no longer on `session` (null: it never had one). */
  private ended(call: Http2Call, session: ClientHttp2Session | null): void {
    this.calls -= 1;
    if (session === null) {
      const at = this.waiting.indexOf(call);
      if (at !== -1) this.waiting.splice(at, 1);
      return;
    }
    const state = this.sessions.get(session);
    if (!state) return;
    state.calls -= 1;
    if (state.calls > 0) {
      this.place();
      return;
    }
    if (this.destroyed || state.leaving || session.closed || session.destroyed) {
      dropped(session, state);
      return;
    }
    this.idle(session, state);
    this.place();
  }

  /** Keeps `session`, with no call on it, for `idleSessionMs`: it keeps no process alive meanwhile. */
  private idle(session: ClientHttp2Session, state: Connection): void {
    session.unref();
    state.idleTimer = this.timers.setTimeout(() => session.close(), idleSessionMs);
  }

  /** Fails the calls waiting for a connection: the one being opened could not be. */
  private connectFailed(error: Error): void {
    this.connecting = false;
    for (const call of this.waiting.splice(0)) call.notConnected(error);
  }

  private openSession(): void {
    this.connecting = true;
    const { hostname, protocol, port } = this.target;
    this.connect({ hostname, host: this.host, protocol, port, localAddress: null }, (error, socket) => {
      if (error) return this.connectFailed(error);
      // undici marks an h2c socket as `h2` itself; a TLS socket says what its handshake chose.
      const { alpnProtocol } = socket as TLSSocket;
      if (alpnProtocol !== 'h2') {
        socket!.destroy();
        return this.connectFailed(
          new UpstreamNotHttp2(`TLS chose ${alpnProtocol || 'none'} by ALPN, not h2`),
        );
      }
      if (this.destroyed) {
        socket!.destroy();
        return this.connectFailed(new errors.ClientDestroyedError());
      }
      this.open(socket as Socket);
    });
  }

  /**
   * An HTTP/2 session on `socket`, ready once the upstream's SETTINGS come (within the connect
   * timeout): the calls waiting then go on it.
   */
  private open(socket: Socket): void {
    const session = http2.connect(this.target, {
      createConnection: () => socket,
      settings: { enablePush: false, initialWindowSize: streamWindowBytes },
    });
    const state: Connection = {
      socket,
      ready: false,
      leaving: false,
      lastStreamId: Infinity,
      error: null,
      calls: 0,
      idleTimer: null,
    };
    this.sessions.set(session, state);
    const noSettings = this.timers.setTimeout(() => {
      state.error = new errors.ConnectTimeoutError('the upstream sent no HTTP/2 SETTINGS');
      session.destroy();
    }, this.settingsTimeout);
    session.once('remoteSettings', () => {
      this.timers.clearTimeout(noSettings);
      state.ready = true;
      this.connecting = false;
      if (streamsAllowed(session) === 0) {
        // It takes no stream now: opening another for the calls waiting would do no better.
        session.close();
        return this.connectFailed(
          new StreamRefused('the upstream allows no streams (its SETTINGS say 0)', true),
        );
      }
      session.setLocalWindowSize(streamsPerConnection * streamWindowBytes);
      this.place();
      // The calls it was opened for may have left meanwhile.
      if (state.calls === 0) this.idle(session, state);
    });
    session.on('error', (error: Error) => (state.error = error));
    session.on('goaway', (_code: number, lastStreamId: number) => {
      state.leaving = true;
      state.lastStreamId = lastStreamId;
      if (state.calls === 0) dropped(session, state);
    });
    session.once('close', () => {
      this.timers.clearTimeout(noSettings);
      this.timers.clearTimeout(state.idleTimer);
      this.sessions.delete(session);
      if (!state.ready) this.connectFailed(state.error ?? new errors.SocketError('the connection closed'));
      // A call may have waited for room on it.
      else this.place();
    });
  }
}
