import type { TLSSocket } from 'node:tls';
import { buildConnector, Pool } from 'undici';

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

/**
 * The connections to the HTTP/2 upstream of a gRPC API: `http://` is HTTP/2 with prior knowledge (h2c,
 * RFC 9113 §3.3), `https://` is TLS whose ALPN must choose `h2` (§3.2), else the connection fails
 * rather than fall back to HTTP/1.1, where trailers, and so gRPC statuses, are lost.
 *
 * One call at a time per connection, kept alive between calls: undici runs a request whose body streams
 * (every gRPC call: client-streaming and bidirectional calls send as they receive) only on a connection
 * with nothing else in flight, so calls in flight each have a connection of their own, as the HTTP/1.1
 * upstreams' exchanges do.
 */
export function http2Pool(origin: string, connectTimeout: number): Pool {
  const tls = new URL(origin).protocol === 'https:';
  const connect = buildConnector({
    allowH2: true,
    timeout: connectTimeout,
    // undici's own switch for prior knowledge (its H2CClient sets it), absent from its types.
    ...(tls ? {} : { useH2c: true }),
  } as buildConnector.BuildOptions);
  return new Pool(origin, {
    pipelining: 1,
    connect(options, callback) {
      connect(options, (error, socket) => {
        if (error) return callback(error, null);
        // undici marks an h2c socket as `h2` itself; a TLS socket says what its handshake chose.
        const { alpnProtocol } = socket as TLSSocket;
        if (alpnProtocol !== 'h2') {
          socket.destroy();
          const chosen = alpnProtocol || 'none';
          return callback(new UpstreamNotHttp2(`TLS chose ${chosen} by ALPN, not h2`), null);
        }
        callback(null, socket);
      });
    },
  });
}
