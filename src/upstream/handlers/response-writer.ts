import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { AnswerChain, Exchange } from '../exchange.js';
import { exchangeOf } from '../exchange.js';
import {
  announceTrailers,
  appendEndToEndResponseFields,
  endToEndTrailers,
  namedInConnection,
} from '../fields/hop-by-hop.js';

/**
 * Notes the upstream's answer as the client's (the time to its head, its status) and returns the head
 * the client is sent: its end-to-end fields behind the gateway's (`exchange.fields`, which it extends).
 * One writeHead with a flat list, and no setHeader: Node then formats the head in one pass. Only an
 * auth plugin that set fields of its own takes the slower merge, and its fields win too.
 */
export function answerHead(
  exchange: Exchange,
  statusCode: number,
  headers: IncomingHttpHeaders,
  respondedAt: number,
): Array<string | string[]> {
  const { res } = exchange;
  exchange.upstreamMs = respondedAt - exchange.forwardedAt;
  exchange.status = statusCode;
  return appendEndToEndResponseFields(headers, exchange.fields, res.getHeaderNames().length > 0 ? res : null);
}

/** Writes the client's head, `fields`, of the upstream's answer (`headers`), and follows its drains. */
export function sendHead(
  exchange: Exchange,
  statusCode: number,
  headers: IncomingHttpHeaders,
  fields: Array<string | string[]>,
  respondedAt: number,
): void {
  const { res } = exchange;
  if (exchange.relaysTrailers && headers.trailer !== undefined) announceTrailers(fields, headers.trailer);
  res.writeHead(statusCode, fields);
  // Node sends a head with the first body bytes: an event stream's client learns at once that it is
  // open, not with the first event, which may be long in coming.
  if (isEventStream(headers['content-type'])) res.flushHeaders();
  exchange.host!.addedResponse(exchange.host!.clock.monotonic() - respondedAt);
  if (!res.writable) return;
  res.on('drain', resumeUpstream);
}

/** The answer's head, relayed to the client; nothing is written once it has gone. */
function writeHead(
  exchange: Exchange,
  _controller: Dispatcher.DispatchController,
  statusCode: number,
  headers: IncomingHttpHeaders,
  respondedAt: number,
): void {
  if (exchange.drained !== null) return;
  sendHead(
    exchange,
    statusCode,
    headers,
    answerHead(exchange, statusCode, headers, respondedAt),
    respondedAt,
  );
}

/**
 * A chunk of the answer's body, written to the client: the upstream is paused while the client cannot
 * take more, or while a charge of its meter is pending.
 */
function writeChunk(exchange: Exchange, controller: Dispatcher.DispatchController, chunk: Buffer): void {
  if (exchange.drained !== null) return;
  exchange.bytesOut += chunk.length;
  // The client's backpressure is noted first: a charge that holds the answer resumes it only once
  // the client has drained as well.
  if (!exchange.res.write(chunk)) exchange.awaitingDrain = true;
  if (exchange.meter !== null && !meteredFlows(exchange, controller)) return;
  if (exchange.awaitingDrain) controller.pause();
}

/**
 * Tells the meter of the chunk that passed: false when the answer may not flow on now (the exchange
 * was ended for it, or a charge holds it: the answer is paused until the charge is decided).
 */
function meteredFlows(exchange: Exchange, controller: Dispatcher.DispatchController): boolean {
  const flows = exchange.meter!.moved();
  if (typeof flows === 'boolean') return flows;
  exchange.heldForCharges += 1;
  controller.pause();
  void flows.then(() => {
    exchange.heldForCharges -= 1;
    if (exchange.heldForCharges === 0 && !exchange.awaitingDrain && !exchange.settled) controller.resume();
  });
  return false;
}

/**
 * Ends the client's response: the upstream's `trailers` relayed to a client that takes them, with
 * `added` (name, value pairs) of the gateway's own.
 *
 * This is the gateway's one coupling with how undici hands an answer's trailers, and
 * test/upstream/handlers/response-writer-trailers.test.ts checks it against the installed version:
 * undici parses them from the raw list it reads (`rawTrailers`, which it also leaves on its
 * controller) into one object, names in lower case and a repeated name as a list, `{}` for none, and
 * tells `onResponseEnd` only once the body before them was handed on.
 */
export function endAnswer(
  exchange: Exchange,
  trailers: IncomingHttpHeaders,
  added?: readonly string[],
): void {
  const { res } = exchange;
  let relayed = exchange.relaysTrailers
    ? endToEndTrailers(trailers, namedInConnection(exchange.responseHeaders ?? trailers))
    : null;
  if (added !== undefined) relayed = { ...relayed, ...fieldsObject(added) };
  if (relayed) res.addTrailers(relayed);
  res.end();
}

/** The handlers of a plain HTTP answer: head, body and trailers relayed to the client as they come. */
export const responseWriter: AnswerChain = { head: writeHead, data: writeChunk, end: endAnswer };

/** Name, value pairs as an object of fields. */
function fieldsObject(pairs: readonly string[]): OutgoingHttpHeaders {
  const fields: OutgoingHttpHeaders = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) fields[pairs[i]!] = pairs[i + 1]!;
  return fields;
}

/** Whether a Content-Type names an event stream (text/event-stream, the WHATWG HTML standard §9.2). */
const isEventStream = (type: string | undefined): boolean =>
  type !== undefined && type.length >= 17 && type.slice(0, 17).toLowerCase() === 'text/event-stream';

// The listener of every exchange's response, shared: `this` is the response, linked to its exchange.
function resumeUpstream(this: ServerResponse): void {
  exchangeOf(this)?.resumeUpstream();
}
