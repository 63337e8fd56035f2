import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { AnswerChain, Exchange, ExchangeHost } from './exchange.js';
import { watched } from './handlers/body-watch.js';
import { startDeadline } from './handlers/deadline.js';
import { grpcTrailersOnly } from './handlers/grpc-trailers-only.js';
import { responseWriter } from './handlers/response-writer.js';
import { targetAnswer } from './handlers/target-answer.js';
import type { Origin } from './origins.js';
import { ReplayableBody } from './replayable-body.js';

/**
 * The handler chains, composed once: an exchange takes the one its API and its request need. A plain
 * API's answer goes through the response writer alone; a gRPC API's through the gRPC trailers-only
 * handler too; a pool's through the target's answer (outlier detection, retries on 502-504) first; the body watch only where something reads the answer's body. The drain after the client
 * leaves is the exchange's own (`readRestOfAnswer`), started only when the pipeline asks for it, and the
 * deadline runs only for a call that has one.
 */
const chains = {
  plain: responseWriter,
  plainWatched: watched(responseWriter),
  grpc: grpcTrailersOnly(responseWriter),
  grpcWatched: watched(grpcTrailersOnly(responseWriter)),
  // A pool's gRPC answer is told to outlier detection too (a success ends a target's run of failures).
  grpcPooled: targetAnswer(grpcTrailersOnly(responseWriter)),
  grpcPooledWatched: targetAnswer(watched(grpcTrailersOnly(responseWriter))),
  // The target's answer is looked at before the watch: one set aside is never watched.
  pooled: targetAnswer(responseWriter),
  pooledWatched: targetAnswer(watched(responseWriter)),
} as const satisfies Record<string, AnswerChain>;

/** The handlers of `exchange`'s answer. */
function chainOf(exchange: Exchange): AnswerChain {
  if (exchange.grpc && exchange.targetsTried > 0)
    return exchange.bodyWatch === null ? chains.grpcPooled : chains.grpcPooledWatched;
  if (exchange.grpc) return exchange.bodyWatch === null ? chains.grpc : chains.grpcWatched;
  if (exchange.targetsTried > 0) return exchange.bodyWatch === null ? chains.pooled : chains.pooledWatched;
  return exchange.bodyWatch === null ? chains.plain : chains.plainWatched;
}

/** The dispatch's share of the proxy: its clock and failures, and the upstream's time to answer. */
export interface DispatchHost extends ExchangeHost {
  readonly proxyTimeout: number;
}

/**
 * Sends the request of `req`'s exchange to `origin`, with the fields of `exchange.upstreamFields` and the
 * origin's Host, through the handlers its API needs; the call's deadline starts when it has one.
 */
export function dispatch(exchange: Exchange, origin: Origin, host: DispatchHost): void {
  const fields = exchange.upstreamFields;
  fields.push('host', origin.host);
  // gRPC servers may refuse a call without it (gRPC over HTTP/2, "Requests"), whatever the client
  // takes; a client that takes trailers has asked for them already.
  if (exchange.grpc && !exchange.relaysTrailers) fields.push('te', 'trailers');
  exchange.host = host;
  exchange.chain = chainOf(exchange);
  if (exchange.grpc) startDeadline(exchange, host.clock);
  send(exchange, origin, host.proxyTimeout);
}

/**
 * Sends the exchange again, to `origin`, the next target of its API's pool, after the one before could
 * not take it (retries.ts): with that target's Host (the gateway's own `host` field, the last of that
 * name: a traced try's `traceparent` may follow it) and `timeout`, what is left of proxyTimeout.
 */
export function redispatch(exchange: Exchange, origin: Origin, timeout: number): void {
  const fields = exchange.upstreamFields;
  let at = fields.length - 2;
  while (fields[at] !== 'host') at -= 2;
  fields[at + 1] = origin.host;
  send(exchange, origin, timeout);
}

function send(exchange: Exchange, origin: Origin, timeout: number): void {
  // Each try is told before it goes: a traced one writes the `traceparent` naming its own client span.
  exchange.tryStarted(origin);
  origin.pool.dispatch(
    {
      path: exchange.upstreamTarget,
      method: exchange.req.method as Dispatcher.HttpMethod,
      headers: exchange.upstreamFields as string[],
      // undici takes an async iterable as a body (its types say Readable): framed by the Content-Length
      // among the fields, or chunked without one.
      body: exchange.hasBody ? (bodyOf(exchange) as unknown as Readable) : null,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    },
    exchange,
  );
}

/** The request body of each gRPC call of an API with a pool, which every target it is sent to reads. */
const replayableBodies = new WeakMap<Exchange, ReplayableBody>();

/**
 * The request body as the exchange sends it: read from its client once, and for a gRPC call of an API
 * with a pool, kept from its start (its first bytes) so that a target that refused the call's stream
 * can be passed over for another (retries.ts).
 */
function bodyOf(exchange: Exchange): AsyncIterable<Buffer> | ReplayableBody {
  if (!exchange.grpc || exchange.targetsTried === 0) return countedBody(exchange);
  let body = replayableBodies.get(exchange);
  if (body === undefined) replayableBodies.set(exchange, (body = new ReplayableBody(countedBody(exchange))));
  return body;
}

/**
 * The most of a request body a meter is told of at once: a read of the body hands on all it has
 * buffered, which may be far more than one read of the socket.
 */
const meteredPieceBytes = 65_536;

/**
 * The request body as undici reads it, counted on the way. undici pulls a chunk only when it has a
 * connection to write it to, so none is read before then (a 'data' listener would start the flow).
 * Under a meter it goes in pieces of at most `meteredPieceBytes`, each told before it is sent: a piece
 * the meter finds no room for is not sent, and the body fails, so that the upstream never takes the
 * bytes before it for a whole body (the exchange has been ended already).
 */
async function* countedBody(exchange: Exchange): AsyncGenerator<Buffer> {
  // A body given up on (cut at its byte restriction, or undici's request failed) is not destroyed:
  // that would destroy an HTTP/1.1 socket, and the answer the gateway gives on it. What is left of it
  // is read and dropped, as Node's HTTP/1.1 server drops it, so that an HTTP/2 stream can end.
  const req: IncomingMessage = exchange.req;
  try {
    for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      if (exchange.meter === null) {
        exchange.bytesIn += chunk.length;
        yield chunk;
        continue;
      }
      for (let at = 0; at < chunk.length; at += meteredPieceBytes) {
        const piece = chunk.length <= meteredPieceBytes ? chunk : chunk.subarray(at, at + meteredPieceBytes);
        exchange.bytesIn += piece.length;
        // The exchange may have ended while the piece before was sent: its meter is gone then.
        const flows = exchange.meter?.moved() ?? true;
        if (!(typeof flows === 'boolean' ? flows : await flows))
          throw new Error('the request body passed its byte restriction');
        yield piece;
      }
    }
  } finally {
    req.resume();
  }
}
