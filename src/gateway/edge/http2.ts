import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import http2, { type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { systemClock, type Clock } from '../../kit/clock.js';
import type { Logger } from '../../observe/log.js';
import { exchangeOf } from '../../upstream/upstream-proxy.js';
import { Http2GatewayRequest, Http2GatewayResponse } from './http2-messages.js';

/** RFC 9113 §3.4: the first bytes of every HTTP/2 connection; no HTTP/1.1 request begins so. */
const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** What a TLS listener offers by ALPN (RFC 7301) when HTTP/2 is on: h2 first, HTTP/1.1 beside it. */
export const alpnProtocols = ['h2', 'http/1.1'];

/** Streams a client may have open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
export const maxConcurrentStreams = 100;
/**
 * Streams a client may reset before their answer ends, on one connection within a second, before the
 * connection is closed with GOAWAY ENHANCE_YOUR_CALM: the rapid reset attack (CVE-2023-44487) opens and
 * cancels streams so fast that the concurrency limit never binds.
 */
export const maxResetsPerSecond = 100;

export interface Http2TransportOptions {
  /** The `request` listener every stream is handed to (the gateway's pipeline). */
  onRequest: (req: IncomingMessage, res: ServerResponse) => void;
  /** The `checkContinue` listener (a stream that waits for `100 Continue`). */
  onCheckContinue: (req: IncomingMessage, res: ServerResponse) => void;
  /** `server` settings of the config: what bounds an HTTP/1.1 connection bounds an HTTP/2 one. */
  limits: { headersTimeout: number; requestTimeout: number; keepAliveTimeout: number; maxHeaderSize: number };
  logger: Logger;
  /** The clock of the reset bound, in milliseconds. */
  now?: () => number;
  /** The timers of the sessions' and streams' bounds (the system's unless a test moves them). */
  timers?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
}

/**
 * What the transport knows of one session: its open streams, its one timer (idle while no stream is
 * open, the liveness check while some are), whether its last PING is unanswered, its recent resets, and
 * the listeners its streams share (made once per session, not per stream).
 */
interface SessionState {
  streams: number;
  timer: unknown;
  pingUnanswered: boolean;
  resetsSince: number;
  resets: number;
  readonly aborted: () => void;
  readonly closed: (this: TrackedStream) => void;
  readonly idle: () => void;
  readonly checkAlive: () => void;
  readonly pong: (error: Error | null) => void;
}

const stateKey = Symbol('quotagate.http2Session');
type TrackedSession = ServerHttp2Session & { [stateKey]?: SessionState };
/** The timer that resets a stream whose request has not arrived whole within requestTimeout. */
const slowKey = Symbol('quotagate.slowRequest');
type TrackedStream = ServerHttp2Stream & { [slowKey]?: unknown };

/**
 * HTTP/2 at the edge of the data plane: the listeners stay Node's HTTP/1.1 servers (their ports, timeouts,
 * workers and shutdown as before), and each connection that speaks HTTP/2 (by prior knowledge on the
 * cleartext port, by ALPN on the TLS one) is handed to one HTTP/2 engine, whose streams enter the same
 * pipeline as HTTP/1.1 requests through `Http2GatewayRequest` and `Http2GatewayResponse`.
 */
export class Http2Transport {
  private readonly engine: Http2Server;
  private readonly sessions = new Set<TrackedSession>();
  /** Cleartext connections whose first bytes have not yet said which protocol they speak. */
  private readonly undecided = new Set<Socket>();
  private closing = false;
  private readonly now: () => number;
  private readonly timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;

  constructor(private readonly options: Http2TransportOptions) {
    this.now = options.now ?? systemClock.now;
    this.timers = options.timers ?? systemClock;
    this.engine = http2.createServer({
      settings: { maxConcurrentStreams, maxHeaderListSize: options.limits.maxHeaderSize },
      Http2ServerRequest: Http2GatewayRequest,
      Http2ServerResponse: Http2GatewayResponse,
    } as http2.ServerOptions);
    // A stream reset before Node handed it over (a malformed body in the same read as its head) has no
    // one to answer: it never enters the pipeline, as an HTTP/1.1 request cut off in its head does not.
    this.engine.on('request', (req: Http2GatewayRequest, res: Http2GatewayResponse) => {
      if (req.stream.destroyed) return;
      this.awaitRequest(req);
      options.onRequest(req as never, res as never);
    });
    this.engine.on('checkContinue', (req: Http2GatewayRequest, res: Http2GatewayResponse) => {
      if (req.stream.destroyed) return;
      this.awaitRequest(req);
      options.onCheckContinue(req as never, res as never);
    });
    this.engine.on('session', (session: TrackedSession) => this.track(session));
    this.engine.on('stream', (stream: TrackedStream) => this.opened(stream));
    this.engine.on('sessionError', (error: Error) =>
      options.logger.debug({ err: { message: error.message } }, 'HTTP/2 connection closed on an error'),
    );
  }

  /**
   * Makes a cleartext listener take HTTP/2 with prior knowledge (h2c, RFC 9113 §3.3) beside HTTP/1.1: the
   * first bytes of each connection say which it speaks.
   */
  acceptPriorKnowledge(server: Server): void {
    const http1 = takeListener(server, 'connection');
    server.on('connection', (socket: Socket) => this.sniff(socket, server, http1));
  }

  /** Makes a TLS listener (made with `alpnProtocols`) hand the connections that chose h2 to HTTP/2. */
  acceptAlpn(server: HttpsServer): void {
    const http1 = takeListener(server, 'secureConnection');
    server.on('secureConnection', (socket: TLSSocket) => {
      if (socket.alpnProtocol === 'h2') this.speakHttp2(socket);
      else http1.call(server, socket);
    });
  }

  /**
   * Hands a connection to the HTTP/2 engine. HTTP/2 ends a stream, a request or a connection in frames
   * (END_STREAM, RST_STREAM, GOAWAY: RFC 9113 §5.1, §6.8), never by half-closing TCP, so a client that
   * shuts its side has left. The listeners are HTTP/1.1 servers, whose sockets stay half-open at the
   * client's FIN (to answer a request that ends so), and Node's engine ends a session's streams only when
   * its socket closes: every stream whose RST_STREAM did not come before the FIN would run on, upstream
   * and in its slot, for as long as its answer lasts (Node's client, destroying a session, resets its
   * first stream only; a killed client resets none).
   */
  private speakHttp2(socket: Socket): void {
    socket.allowHalfOpen = false;
    this.engine.emit('connection', socket);
  }

  /** Asks every session to end (GOAWAY): the streams they have go on, no new one is taken. */
  close(): void {
    this.closing = true;
    for (const session of this.sessions) session.close();
    for (const socket of this.undecided) socket.destroy();
  }

  /** Ends every session at once, with what streams they still have. */
  closeAll(): void {
    for (const session of this.sessions) session.destroy();
  }

  private sniff(socket: Socket, server: Server, http1: (socket: Socket) => void): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    this.undecided.add(socket);
    let seen: Buffer | null = null;
    const decided = (http2: boolean) => {
      this.undecided.delete(socket);
      socket.off('data', onData).off('error', ignore).off('timeout', onTimeout).setTimeout(0);
      socket.pause();
      if (seen) socket.unshift(seen);
      if (http2) {
        this.speakHttp2(socket);
        return;
      }
      http1.call(server, socket);
      // Node's HTTP/1.1 parser reads the socket's handle itself from now on: the bytes put back are
      // handed to it as 'data' once the socket flows again.
      socket.resume();
    };
    const onData = (chunk: Buffer) => {
      seen = seen ? Buffer.concat([seen, chunk]) : chunk;
      const compared = Math.min(seen.length, preface.length);
      const http2 = seen.compare(preface, 0, compared, 0, compared) === 0;
      if (!http2 || seen.length >= preface.length) decided(http2);
    };
    // A connection that says nothing is closed as an HTTP/1.1 one that sends no head would be.
    const onTimeout = () => {
      this.undecided.delete(socket);
      socket.destroy();
    };
    socket.on('data', onData).on('error', ignore).on('timeout', onTimeout);
    socket.on('close', () => this.undecided.delete(socket));
    socket.setTimeout(this.options.limits.headersTimeout);
  }

  private track(session: TrackedSession): void {
    if (this.closing) {
      session.close();
      return;
    }
    const state: SessionState = {
      streams: 0,
      timer: null,
      pingUnanswered: false,
      resetsSince: 0,
      resets: 0,
      aborted: () => this.reset(session, state),
      closed: ((transport: Http2Transport) =>
        function (this: TrackedStream): void {
          const slow = this[slowKey];
          if (slow !== undefined) transport.timers.clearTimeout(slow);
          transport.closed(session, state);
        })(this),
      idle: () => {
        state.timer = null;
        if (!session.closed) session.close();
      },
      checkAlive: () => this.checkAlive(session, state),
      pong: (error) => {
        if (error === null) state.pingUnanswered = false;
      },
    };
    session[stateKey] = state;
    this.sessions.add(session);
    // A session must open its first stream within headersTimeout, as an HTTP/1.1 connection must send
    // its first head; between streams it may stay idle for keepAliveTimeout.
    this.rearm(state, state.idle, this.options.limits.headersTimeout);
    session.once('close', () => {
      this.rearm(state, null, 0);
      this.sessions.delete(session);
    });
  }

  /** Sets the session's one timer to `then` in `ms` (none when null), in place of the one it had. */
  private rearm(state: SessionState, then: (() => void) | null, ms: number): void {
    if (state.timer !== null) this.timers.clearTimeout(state.timer);
    state.timer = then === null ? null : this.timers.setTimeout(then, ms);
  }

  private opened(stream: TrackedStream): void {
    const session = stream.session as TrackedSession | undefined;
    const state = session?.[stateKey];
    if (!session || !state) return;
    state.streams += 1;
    // While streams are open the session is not idle, but its client may vanish without a word (no FIN,
    // no RST: a network gone, a machine asleep), leaving them running: it is asked for a PING.
    if (state.streams === 1) {
      state.pingUnanswered = false;
      this.rearm(state, state.checkAlive, this.options.limits.keepAliveTimeout);
    }
    stream.once('aborted', state.aborted);
    stream.once('close', state.closed);
  }

  /**
   * The request, its body included, must arrive within requestTimeout, as on HTTP/1.1 (`requestOverdue`
   * says what then); a request whose HEADERS ended the stream has arrived, however long its answer runs.
   */
  private awaitRequest(req: Http2GatewayRequest): void {
    const stream = req.stream as TrackedStream;
    if (stream.endAfterHeaders) return;
    stream[slowKey] = this.timers.setTimeout(() => requestOverdue(req), this.options.limits.requestTimeout);
    stream.once('end', this.requestArrived);
  }

  /** The listener of a stream's 'end': its request has arrived whole. */
  private readonly requestArrived = ((transport: Http2Transport) =>
    function (this: TrackedStream): void {
      const slow = this[slowKey];
      if (slow === undefined) return;
      transport.timers.clearTimeout(slow);
      this[slowKey] = undefined;
    })(this);

  /**
   * Every keepAliveTimeout while streams are open: the session's client is asked for a PING (RFC 9113
   * §6.7), and one that has not answered the last by now has gone, and its session with it.
   */
  private checkAlive(session: TrackedSession, state: SessionState): void {
    state.timer = null;
    if (session.destroyed) return;
    if (state.pingUnanswered) {
      this.options.logger.debug(
        { client: session.socket?.remoteAddress, keepAliveTimeout: this.options.limits.keepAliveTimeout },
        'HTTP/2 client answered no PING; closing its connection',
      );
      // CANCEL: each stream is ended as one its client gave up, as when its connection closes.
      session.destroy(undefined, http2.constants.NGHTTP2_CANCEL);
      return;
    }
    state.pingUnanswered = true;
    session.ping(state.pong);
    this.rearm(state, state.checkAlive, this.options.limits.keepAliveTimeout);
  }

  private closed(session: TrackedSession, state: SessionState): void {
    state.streams -= 1;
    // A session told to go (GOAWAY) ends with its last stream: no idle timer for it.
    if (state.streams === 0)
      this.rearm(state, session.closed ? null : state.idle, this.options.limits.keepAliveTimeout);
  }

  /** A client reset a stream before its answer ended: too many in a second close the session. */
  private reset(session: TrackedSession, state: SessionState): void {
    const now = this.now();
    if (now - state.resetsSince >= 1_000) {
      state.resetsSince = now;
      state.resets = 0;
    }
    state.resets += 1;
    if (state.resets <= maxResetsPerSecond || session.destroyed) return;
    this.options.logger.warn(
      { client: session.socket?.remoteAddress, resets: state.resets },
      'HTTP/2 client reset too many streams; closing its connection',
    );
    // GOAWAY first: destroying a session within nghttp2's reading of it sends a plain NO_ERROR.
    session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    session.destroy();
  }
}

const ignore = () => undefined;

/**
 * requestTimeout has passed, and the request has not arrived whole. An ordinary body is too slow: the
 * stream is reset. A request that is a stream of messages goes on while its answer does, bounded as the
 * answer is (by proxyTimeout between messages and by its grpc-timeout): one whose answer has begun (a
 * bidirectional call, a request body beside the event stream that answers it), and a gRPC call forwarded
 * to its API's upstream (a client-streaming call, answered at its end; undici's HTTP/2 stream to the
 * upstream times out after proxyTimeout with no frame either way). Its request still coming once the
 * answer has ended, it is reset then.
 */
function requestOverdue(req: Http2GatewayRequest): void {
  const stream = req.stream as TrackedStream;
  stream[slowKey] = undefined;
  const streaming = !stream.writableEnded && (stream.headersSent || exchangeOf(req)?.grpc === true);
  if (streaming) stream.once('finish', cancelUnlessArrived);
  else cancelStream(stream);
}

function cancelUnlessArrived(this: ServerHttp2Stream): void {
  if (!this.readableEnded) cancelStream(this);
}

function cancelStream(stream: ServerHttp2Stream): void {
  if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
}

/** Removes Node's own listener of `event` from `server` and returns it (the listener a server is made with). */
function takeListener(server: Server | HttpsServer, event: string): (socket: Socket) => void {
  const listeners = server.listeners(event) as Array<(socket: Socket) => void>;
  if (listeners.length !== 1)
    throw new Error(`expected Node's one '${event}' listener, found ${listeners.length}`);
  server.removeAllListeners(event);
  return listeners[0]!;
}
