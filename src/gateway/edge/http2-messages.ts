import type { IncomingHttpHeaders, OutgoingHttpHeader, OutgoingHttpHeaders } from 'node:http';
import http2, { type ServerHttp2Stream } from 'node:http2';
import type { ReadableOptions } from 'node:stream';

/**
 * The request of one HTTP/2 stream, as the gateway's pipeline reads a request: its `headers` and
 * `headersDistinct` are the HTTP fields alone (RFC 9113 §8.3: pseudo-header fields are not HTTP fields,
 * and never go upstream), with `host` taken from `:authority` when the client sent no Host; its `url` is
 * `:path`, which the pipeline rewrites as for HTTP/1.1. What HTTP/1.1 could not carry as one request is
 * named in `problem`, and the pipeline refuses it (400) before routing.
 *
 * nghttp2 has refused the rest already (a stream error, before Node sees the request): upper-case names,
 * CR, LF or NUL in a name or value, connection-specific fields (`transfer-encoding`, `connection`,
 * `keep-alive`, `upgrade`, `proxy-connection`, a `te` other than `trailers`), two `host` or
 * `content-length` fields, and DATA that contradicts `content-length` (RFC 9113 §8.1.1, §8.2.2).
 */
export class Http2GatewayRequest extends http2.Http2ServerRequest {
  /** Why this request cannot be forwarded as HTTP/1.1, or null. */
  readonly problem: string | null;
  private distinct: Record<string, string[]> | null = null;

  constructor(
    stream: ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    options: ReadableOptions,
    rawHeaders: string[],
  ) {
    super(stream, headers, options, rawHeaders);
    // Duplicates are joined as the HTTP/1.1 listener joins them (`joinDuplicateHeaders`): a second
    // credential makes the field malformed rather than unseen; cookies are joined as RFC 9113 §8.2.3 says.
    const fields: IncomingHttpHeaders = Object.create(null) as IncomingHttpHeaders;
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i]!;
      if (name.charCodeAt(0) === 0x3a) continue;
      const value = rawHeaders[i + 1]!;
      const existing = fields[name];
      if (name === 'set-cookie') (fields['set-cookie'] ??= []).push(value);
      else if (existing === undefined) fields[name] = value;
      else fields[name] = `${existing as string}${name === 'cookie' ? '; ' : ', '}${value}`;
    }
    const authority = headers[':authority'];
    const path = headers[':path'];
    this.problem =
      path === undefined || path.charCodeAt(0) !== 0x2f
        ? // RFC 9113 §8.3.1: CONNECT has no :path, and `*` names no resource of the catalog.
          'an HTTP/2 :path that is not a path'
        : authority !== undefined &&
            typeof fields.host === 'string' &&
            authority.toLowerCase() !== fields.host.toLowerCase()
          ? // RFC 9113 §8.3.1: a Host that differs from :authority must not be trusted to mean it.
            'HTTP/2 :authority and host disagree'
          : null;
    if (fields.host === undefined && authority !== undefined) fields.host = authority;
    // Own properties in place of Node's accessors, which read the pseudo-header fields: `url` is
    // rewritten by the pipeline (the routed path, then the upstream's) as on HTTP/1.1.
    Object.defineProperty(this, 'headers', { value: fields });
    Object.defineProperty(this, 'url', { value: path ?? '', writable: true });
  }

  /** Each field's values as received, as `IncomingMessage.headersDistinct` has them; made when first read. */
  get headersDistinct(): Record<string, string[]> {
    if (this.distinct) return this.distinct;
    const distinct: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
    const raw = this.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.charCodeAt(0) !== 0x3a) (distinct[name] ??= []).push(raw[i + 1]!);
    }
    return (this.distinct = distinct);
  }
}

/**
 * RFC 9113 §8.2.2: fields that make no sense on an HTTP/2 stream, which Node refuses to send (it throws):
 * the gateway's own `connection: close` and any such field of an upstream's answer are left out.
 */
export const connectionSpecific: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'host',
  'http2-settings',
  'te',
]);

/**
 * The response of one HTTP/2 stream: its head never carries a connection-specific field, it is
 * `destroyed` once its stream is, as a ServerResponse is once its socket is, and `writableFinished` only
 * once all of it was sent.
 */
export class Http2GatewayResponse extends http2.Http2ServerResponse {
  override writeHead(statusCode: number, headers?: OutgoingHttpHeaders | OutgoingHttpHeader[]): this;
  override writeHead(
    statusCode: number,
    statusMessage: string,
    headers?: OutgoingHttpHeaders | OutgoingHttpHeader[],
  ): this;
  override writeHead(
    statusCode: number,
    second?: string | OutgoingHttpHeaders | OutgoingHttpHeader[],
    third?: OutgoingHttpHeaders | OutgoingHttpHeader[],
  ): this {
    const headers = typeof second === 'string' ? third : second;
    // Node's compatibility API takes a flat list of names and values, as ServerResponse does (its types
    // say an object only).
    return super.writeHead(
      statusCode,
      (headers === undefined ? headers : withoutConnectionFields(headers)) as OutgoingHttpHeaders,
    );
  }

  /**
   * Ends the answer. One given while the client still sends its request's body (a refusal, an upload
   * cut at its byte restriction, a call ended while its client streams) discards the rest of the body,
   * as Node's HTTP/1.1 server dumps it, and asks the client to stop sending with RST_STREAM NO_ERROR
   * once the answer and its trailers (Node's compatibility API always offers them) are sent (RFC 9113
   * §8.1). Node otherwise keeps the stream, and the exchange with it, open while a client held back by
   * flow control waits to send the rest; closed before the trailers, the answer would lose its end.
   */
  override end(...args: unknown[]): this {
    (super.end as (...rest: unknown[]) => this)(...args);
    const { stream } = this;
    if (
      !this.req.readableEnded &&
      !stream.endAfterHeaders &&
      !stream.closed &&
      stream.state.remoteClose === 0
    ) {
      this.req.resume();
      stream.once('wantTrailers', closeAfterTrailers);
    }
    return this;
  }
}

// What the pipeline reads of a response as of a ServerResponse: Node's compatibility response has no
// `destroyed` (its types name one), and calls itself `writableFinished` once its stream has closed,
// even when a reset cut it short: it is finished once ended and its stream closed without an error. It
// is destroyed once its stream is closed: a stream reset (by the client, or by the gateway at
// requestTimeout) takes no frame more, though Node destroys it only once nghttp2 has sent the reset.
Object.defineProperties(Http2GatewayResponse.prototype, {
  destroyed: {
    get(this: Http2GatewayResponse): boolean {
      return this.stream.closed || this.stream.destroyed;
    },
  },
  writableFinished: {
    get(this: Http2GatewayResponse): boolean {
      return this.writableEnded && this.stream.rstCode === http2.constants.NGHTTP2_NO_ERROR;
    },
  },
});

function withoutConnectionFields(
  headers: OutgoingHttpHeaders | OutgoingHttpHeader[],
): OutgoingHttpHeaders | OutgoingHttpHeader[] {
  if (!Array.isArray(headers)) {
    const kept: OutgoingHttpHeaders = {};
    for (const name in headers) if (!connectionSpecific.has(name.toLowerCase())) kept[name] = headers[name];
    return kept;
  }
  const kept: OutgoingHttpHeader[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = String(headers[i]).toLowerCase();
    if (!connectionSpecific.has(name)) kept.push(name, headers[i + 1]!);
  }
  return kept;
}

/**
 * Closes a stream once the trailers its 'wantTrailers' listener before this one gave are on their way,
 * and lets it go once the reset is sent: Node destroys a closed stream only once its body was read to
 * its end, and one a reader holds paused (the body's meter waiting on the store) would keep the
 * exchange open.
 */
function closeAfterTrailers(this: ServerHttp2Stream): void {
  setImmediate(() => {
    this.close(http2.constants.NGHTTP2_NO_ERROR);
    if (this.writableFinished) this.destroy();
    else this.once('finish', () => this.destroy());
  });
}
