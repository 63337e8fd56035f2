import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { AnswerChain, Exchange } from '../exchange.js';
import { headEndedStream } from '../http2-upstream.js';
import { answerHead, endAnswer, sendHead } from './response-writer.js';

/** The fields of a call's status (gRPC over HTTP/2, "Responses": Status), and its details (grpc-go's). */
const statusFields: readonly string[] = ['grpc-status', 'grpc-message', 'grpc-status-details-bin'];

/** Whether an answer's head carries any field of a call's status. */
export const carriesGrpcStatus = (headers: IncomingHttpHeaders): boolean =>
  statusFields.some((name) => headers[name] !== undefined);

/**
 * `fields` (name, value pairs, lower-case names) without a call's status: of a head that is not the
 * whole answer, whose status the trailers say.
 */
export function withoutGrpcStatus(fields: ReadonlyArray<string | string[]>): Array<string | string[]> {
  const kept: Array<string | string[]> = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i] as string;
    if (!statusFields.includes(name)) kept.push(name, fields[i + 1]!);
  }
  return kept;
}

/**
 * A gRPC call's head. One that ended the upstream's stream is a trailers-only answer: held, to end the
 * client's stream in one HEADERS frame as the upstream's end is told. Before messages, a status in the
 * head is no client's to take (the trailers say the call's); another HTTP status is the call's status.
 */
function callHead(
  exchange: Exchange,
  controller: Dispatcher.DispatchController,
  statusCode: number,
  headers: IncomingHttpHeaders,
  respondedAt: number,
): void {
  if (exchange.drained !== null) return;
  let fields = answerHead(exchange, statusCode, headers, respondedAt);
  if (statusCode === 200) {
    if (headEndedStream(controller)) {
      exchange.heldHead = fields as string[];
      return;
    }
    if (carriesGrpcStatus(headers)) fields = withoutGrpcStatus(fields);
  } else if (exchange.readsGrpc()) {
    exchange.grpcStatusRead(statusCode, undefined);
  }
  sendHead(exchange, statusCode, headers, fields, respondedAt);
}

/**
 * A gRPC call answered 200 ends with its status: the head's of a trailers-only answer, or the
 * trailers'. Without one the upstream broke gRPC (the proxy says so), and the client is given the
 * gateway's status (`grpcStatusMissing`), which the pipeline renders.
 */
function callEnd(exchange: Exchange, trailers: IncomingHttpHeaders): void {
  const held = exchange.heldHead;
  const call = exchange.status === 200 && exchange.readsGrpc();
  const status = held ? exchange.responseHeaders!['grpc-status'] : trailers['grpc-status'];
  let added: readonly string[] | undefined;
  if (call && status === undefined) {
    exchange.host!.answeredWithoutStatus(exchange);
    added = exchange.grpcStatusMissing();
  } else if (call) {
    exchange.grpcStatusRead(200, status);
  }
  if (held === null) endAnswer(exchange, trailers, added);
  else exchange.endTrailersOnly(added === undefined ? held : [...held, ...added]);
}

/** `next` (the response writer) with a gRPC call's status kept as gRPC says. */
export function grpcTrailersOnly(next: AnswerChain): AnswerChain {
  return { head: callHead, data: next.data, end: callEnd };
}
