import type { IncomingHttpHeaders } from 'node:http';
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { buildConnector, errors, type Dispatcher } from 'undici';
import type { Clock } from '../kit/clock.js';
import type { UpstreamTlsOptions } from './upstream-tls.js';

/** The upstream of a gRPC API did not take HTTP/2: its TLS handshake chose another protocol by ALPN. */
class UpstreamNotHttp2 extends Error {
  readonly code = 'UPSTREAM_NOT_HTTP2';
}

/** The upstream's stream closed (reset, its connection lost) before its answer was whole. */
class StreamClosedEarly extends Error {
  readonly code = 'UPSTREAM_STREAM_CLOSED';
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

/** What is known of one connection: whether it may take a call, how it failed, its idle timer. */
interface SessionState {
  /** The upstream sent GOAWAY: no new call goes on it. */
  leaving: boolean;
  error: Error | null;
  idleTimer: unknown;
}

/**
 * The connections to the HTTP/2 upstream of a gRPC API: `http://` is HTTP/2 with prior knowledge (h2c,
 * RFC 9113 §3.3), `https://` is TLS whose ALPN must choose `h2` (§3.2), else the connection fails
 * rather than fall back to HTTP/1.1, where trailers, and so gRPC statuses, are lost.
 *
 * Each call in flight has a connection of its own, kept for the next call for `idleSessionMs`: a call
 * whose client reads slowly is held back by its own stream's flow control and its connection's, and so
 * never holds back another's.
 *
 * Node's HTTP/2 client is driven here rather than through undici's, whose HTTP/2 client (7.30.2) ends
 * an answer when its trailers arrive, dropping the messages still waiting in a stream paused for a
 * client that had not taken them yet: the last messages of a call were lost, and the call still ended
 * OK. Here an answer ends only once every byte before its trailers has been handed on.
 */
export class Http2Upstream implements UpstreamDispatcher {
  private readonly connect: buildConnector.connector;
  private readonly target: URL;
  private readonly sessions = new Map<ClientHttp2Session, SessionState>();
  private readonly idle: ClientHttp2Session[] = [];
  private destroyed = false;

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
    const tls = this.target.protocol === 'https:';
    this.connect = buildConnector({
      ...tlsOptions,
      allowH2: true,
      timeout: connectTimeout,
      // undici's own switch for prior knowledge, absent from its types: the socket is marked `h2`.
      ...(tls ? {} : { useH2c: true }),
    } as buildConnector.BuildOptions);
  }

  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const call = new Http2Call(options, handler, (session) => this.release(session));
    handler.onRequestStart?.(call, {});
    if (call.aborted) return true;
    this.session((error, session) => {
      if (error) call.fail(error);
      else call.start(session!, this.sessions.get(session!)!);
    });
    return true;
  }

  async destroy(): Promise<void> {
    this.destroyed = true;
    const closing = [...this.sessions.keys()].map(
      (session) => new Promise<void>((resolve) => session.once('close', () => resolve()).destroy()),
    );
    await Promise.all(closing);
  }

  /** A connection with nothing on it: one kept from an earlier call, or a new one. */
  private session(then: (error: Error | null, session?: ClientHttp2Session) => void): void {
    for (let session = this.idle.pop(); session !== undefined; session = this.idle.pop()) {
      const state = this.sessions.get(session);
      if (!state || session.closed || session.destroyed || state.leaving) continue;
      this.timers.clearTimeout(state.idleTimer);
      session.ref();
      then(null, session);
      return;
    }
    const { hostname, protocol, port } = this.target;
    this.connect({ hostname, host: this.host, protocol, port, localAddress: null }, (error, socket) => {
      if (error) return then(error);
      // undici marks an h2c socket as `h2` itself; a TLS socket says what its handshake chose.
      const { alpnProtocol } = socket as TLSSocket;
      if (alpnProtocol !== 'h2') {
        socket!.destroy();
        return then(new UpstreamNotHttp2(`TLS chose ${alpnProtocol || 'none'} by ALPN, not h2`));
      }
      if (this.destroyed) {
        socket!.destroy();
        return then(new errors.ClientDestroyedError());
      }
      then(null, this.open(socket as Socket));
    });
  }

  private open(socket: Socket): ClientHttp2Session {
    const session = http2.connect(this.target, {
      createConnection: () => socket,
      settings: { enablePush: false },
    });
    const state: SessionState = { leaving: false, error: null, idleTimer: null };
    this.sessions.set(session, state);
    session.on('error', (error: Error) => (state.error = error));
    session.on('goaway', () => (state.leaving = true));
    session.once('close', () => {
      this.timers.clearTimeout(state.idleTimer);
      this.sessions.delete(session);
      const at = this.idle.indexOf(session);
      if (at !== -1) this.idle.splice(at, 1);
    });
    return session;
  }

  /** A call's stream has closed: its connection is kept for the next call, or closed. */
  private release(session: ClientHttp2Session): void {
    const state = this.sessions.get(session);
    if (!state) return;
    if (this.destroyed || state.leaving || session.closed || session.destroyed) {
      session.close();
      return;
    }
    session.unref();
    state.idleTimer = this.timers.setTimeout(() => session.close(), idleSessionMs);
    this.idle.push(session);
  }
}

/**
 * One call on an HTTP/2 connection, and undici's controller of it: its handler is told of the answer's
 * head, each chunk of its body, and its end with the trailers once every chunk before them was handed
 * on (or of its failure), and pauses, resumes or aborts it.
 */
class Http2Call implements Dispatcher.DispatchController {
  aborted = false;
  reason: Error | null = null;
  paused = false;
  /** The answer's head came in a HEADERS frame that ended the stream: nothing follows it. */
  headEndedStream = false;
  private stream: ClientHttp2Stream | null = null;
  /** The handler has been told the call's end, its failure or its abort: nothing more is told. */
  private done = false;
  private responded = false;
  private trailers: IncomingHttpHeaders = {};

  constructor(
    private readonly options: Dispatcher.DispatchOptions,
    private readonly handler: Dispatcher.DispatchHandler,
    private readonly released: (session: ClientHttp2Session) => void,
  ) {}

  pause(): void {
    this.paused = true;
    this.stream?.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.stream?.resume();
  }

  abort(reason: Error): void {
    if (this.aborted || this.done) return;
    this.aborted = true;
    this.reason = reason;
    this.stream?.close(http2.constants.NGHTTP2_CANCEL);
    this.fail(reason);
  }

  /** Sends the request on `session` (one with no other call), its body as it comes. */
  start(session: ClientHttp2Session, state: SessionState): void {
    if (this.done) {
      this.released(session);
      return;
    }
    const { body, headersTimeout, bodyTimeout } = this.options;
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(this.requestHeaders(), { endStream: body === null || body === undefined });
    } catch (error) {
      // A field HTTP/2 does not carry, or a connection closing as it was taken: nothing was sent.
      this.fail(error as Error);
      this.released(session);
      return;
    }
    this.stream = stream;
    stream.setTimeout(headersTimeout ?? 300_000);
    stream.once('response', (headers, flags) => {
      this.responded = true;
      this.headEndedStream = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
      stream.setTimeout(bodyTimeout ?? 300_000);
      if (this.done) return;
      this.handler.onResponseStart?.(this, Number(headers[':status']), fieldsOf(headers), '');
      stream.on('data', (chunk: Buffer) => {
        if (!this.done) this.handler.onResponseData?.(this, chunk);
      });
      if (this.paused) stream.pause();
    });
    stream.once('trailers', (trailers) => (this.trailers = fieldsOf(trailers)));
    // 'end' comes once every chunk before the end has been read: the trailers, which Node tells as they
    // arrive, are then told after them.
    stream.once('end', () => {
      if (this.done) return;
      if (!this.responded) {
        this.fail(new StreamClosedEarly('the upstream ended its stream without an answer'));
        return;
      }
      // Node ends the readable side of a stream its peer reset with CANCEL as if it had ended: the
      // answer was cut, not whole.
      if (stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) {
        this.fail(new StreamClosedEarly(`the upstream reset its stream (code ${stream.rstCode})`));
        return;
      }
      this.done = true;
      this.handler.onResponseEnd?.(this, this.trailers);
      // Its answer is whole: what the client still sends is of no use to anyone.
      if (!stream.writableEnded) stream.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.once('timeout', () => {
      this.fail(
        this.responded
          ? new errors.BodyTimeoutError('the upstream sent nothing for bodyTimeout')
          : new errors.HeadersTimeoutError('the upstream did not answer within headersTimeout'),
      );
      stream.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.on('error', (error: Error) => this.fail(state.error ?? error));
    stream.once('close', () => {
      this.fail(
        state.error ??
          new StreamClosedEarly(
            `the upstream's stream closed before its answer ended (code ${stream.rstCode})`,
          ),
      );
      this.released(session);
    });
    if (body !== null && body !== undefined) void this.send(stream, body as AsyncIterable<Buffer>);
  }

  /** The handler is told of the call's failure, once, unless it has ended already. */
  fail(error: Error): void {
    if (this.done) return;
    this.done = true;
    this.handler.onResponseError?.(this, error);
  }

  /** The request's fields, with the pseudo-fields of HTTP/2 (RFC 9113 §8.3.1); `host` is `:authority`. */
  private requestHeaders(): OutgoingHttpHeaders {
    const { method, path, headers } = this.options;
    const fields: OutgoingHttpHeaders = { ':method': method, ':path': path };
    const list = (headers ?? []) as Array<string | string[]>;
    for (let i = 0; i + 1 < list.length; i += 2) {
      const name = (list[i] as string).toLowerCase();
      const value = list[i + 1]!;
      if (name === 'host') {
        fields[':authority'] = value as string;
        continue;
      }
      const known = fields[name];
      fields[name] = known === undefined ? value : [known, value].flat().map(String);
    }
    return fields;
  }

  /** Streams the request body up, as fast as the upstream takes it; a failed body resets the stream. */
  private async send(stream: ClientHttp2Stream, body: AsyncIterable<Buffer>): Promise<void> {
    try {
      for await (const chunk of body) {
        if (stream.destroyed || stream.closed) return;
        if (!stream.write(chunk)) await drained(stream);
      }
      if (!stream.destroyed && !stream.closed) stream.end();
    } catch (error) {
      this.fail(error as Error);
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }
  }
}

/**
 * Whether the answer `controller` runs ended with its head: a HEADERS frame with END_STREAM (RFC 9113
 * §8.1), which for a gRPC call is a trailers-only answer. Told once its head is; false for an answer
 * not over HTTP/2.
 */
export const headEndedStream = (controller: Dispatcher.DispatchController): boolean =>
  controller instanceof Http2Call && controller.headEndedStream;

/** Resolves once `stream` takes more, or has closed. */
function drained(stream: ClientHttp2Stream): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done).off('close', done);
      resolve();
    };
    stream.on('drain', done).on('close', done);
  });
}

/** HTTP fields of an HTTP/2 head or trailers: its pseudo-fields left out (RFC 9113 §8.3). */
function fieldsOf(headers: http2.IncomingHttpHeaders): IncomingHttpHeaders {
  const fields: IncomingHttpHeaders = {};
  for (const name in headers) if (name.charCodeAt(0) !== 0x3a) fields[name] = headers[name];
  return fields;
}
