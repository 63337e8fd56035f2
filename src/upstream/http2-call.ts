import type { IncomingHttpHeaders } from 'node:http';
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import { errors, type Dispatcher } from 'undici';
import { ReplayableBody } from './replayable-body.js';

/** The upstream's stream closed (reset, its connection lost) before its answer was whole. */
class StreamClosedEarly extends Error {
  readonly code = 'UPSTREAM_STREAM_CLOSED';
}

/**
 * The upstream did not process the stream (RFC 9113 §8.7): it reset it with REFUSED_STREAM, or its
 * GOAWAY's last stream id is below it. `bodyKept` says whether the request's body, if any, can be sent
 * again from its start (replayable-body.ts).
 */
export class StreamRefused extends Error {
  readonly code = 'UPSTREAM_STREAM_REFUSED';
  constructor(
    message: string,
    readonly bodyKept: boolean,
  ) {
    super(message);
  }
}

/** What is known of one connection: whether it may take a call, how it failed, its calls and idle timer. */
export interface SessionState {
  /** The upstream's SETTINGS came (RFC 9113 §3.4): it says how many streams the connection takes. */
  ready: boolean;
  /** The upstream sent GOAWAY: no new call goes on it. */
  leaving: boolean;
  /** The GOAWAY's last stream id: streams above it were not processed (RFC 9113 §6.8). */
  lastStreamId: number;
  error: Error | null;
  /** Calls on it now. */
  calls: number;
  idleTimer: unknown;
}

/**
 * One call on an HTTP/2 connection, and undici's controller of it: its handler is told of the answer's
 * head, each chunk of its body, and its end with the trailers once every chunk before them was handed
 * on (or of its failure), and pauses, resumes or aborts it.
 */
export class Http2Call implements Dispatcher.DispatchController {
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
  /** The body, when it may be sent again after a refusal (an exchange of a pool's); held while the call runs. */
  private readonly body: ReplayableBody | null;
  /** `released` has been told: the call holds nothing. */
  private finished = false;

  constructor(
    private readonly options: Dispatcher.DispatchOptions,
    private readonly handler: Dispatcher.DispatchHandler,
    /** Told once the call no longer holds a stream of `session` (null: it never had one). */
    private readonly released: (call: Http2Call, session: ClientHttp2Session | null) => void,
  ) {
    this.body = options.body instanceof ReplayableBody ? options.body : null;
    this.body?.hold();
  }

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
    if (this.stream === null) this.release(null);
  }

  /** The connection the call waited for could not be opened: nothing of it was sent. */
  notConnected(error: Error): void {
    this.fail(error);
    this.release(null);
  }

  /** Sends the request on `session`, its body as it comes. */
  start(session: ClientHttp2Session, state: SessionState): void {
    const { body, headersTimeout, bodyTimeout } = this.options;
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(this.requestHeaders(), { endStream: body === null || body === undefined });
    } catch (error) {
      // A field HTTP/2 does not carry, or a connection closing as it was taken: nothing was sent.
      this.fail(error as Error);
      this.release(session);
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
    stream.on('error', (error: Error) => this.fail(this.refusal(stream, state) ?? state.error ?? error));
    stream.once('close', () => {
      this.fail(
        this.refusal(stream, state) ??
          state.error ??
          new StreamClosedEarly(
            `the upstream's stream closed before its answer ended (code ${stream.rstCode})`,
          ),
      );
      this.release(session);
    });
    if (body !== null && body !== undefined)
      void this.send(stream, this.body?.read() ?? (body as AsyncIterable<Buffer>));
  }

  /**
   * The stream's refusal, when its upstream did not process it (RFC 9113 §8.7): reset with
   * REFUSED_STREAM, or above the last stream id of a GOAWAY (§6.8), before any answer came.
   */
  private refusal(stream: ClientHttp2Stream, state: SessionState): StreamRefused | null {
    if (this.responded) return null;
    const refused =
      stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM ||
      (stream.id !== undefined && stream.id > state.lastStreamId);
    if (!refused) return null;
    const bodyKept = this.options.body === null || this.options.body === undefined || !!this.body?.replayable;
    return new StreamRefused('the upstream refused the stream: it was not processed', bodyKept);
  }

  /** The call holds no stream now: its connection is told, and its body let go. */
  private release(session: ClientHttp2Session | null): void {
    if (this.finished) return;
    this.finished = true;
    this.body?.release();
    this.released(this, session);
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
