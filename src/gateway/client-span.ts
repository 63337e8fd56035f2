import type { Attributes, Span, SpanStatusCode } from '@opentelemetry/api';
import { withoutQuery } from '../kit/normalize-path.js';
import type { ExchangeTrace } from '../observe/tracing.js';
import type { Exchange, TryEnd, TryTarget } from '../upstream/exchange.js';
import { failureOutcome, type ProxyOutcome } from '../upstream/outcomes.js';
import { addUpstreamGrpcStatus, grpcClientSpanName } from './answers/grpc.js';
import { knownMethods } from './http-methods.js';

/** `SpanStatusCode.ERROR`, by its value: gateway/ loads nothing of OpenTelemetry (its types only). */
const statusError = 2 as SpanStatusCode.ERROR;

/**
 * The upstream client spans of an exchange: one per try (each target of a pool it is sent to), as Envoy
 * and OpenTelemetry's HTTP clients make them, each the parent the upstream sees in its `traceparent`.
 * Started only when the server span records: a sampled-out exchange keeps the `traceparent` that
 * `forward` wrote.
 */
export interface ClientSpans {
  /** The try's span, open until the try ends; null between tries and when none is traced. */
  clientSpan: Span | null;
}

/**
 * Starts the client span of a try to `target` (HTTP client semantic conventions, named by the method;
 * a gRPC call by the RPC conventions, `package.Service/Method`), and writes the `traceparent` of the
 * upstream's request naming it as its parent, in place of the one the try before wrote.
 */
export function startClientSpan(
  trace: ExchangeTrace,
  exchange: Exchange & ClientSpans,
  target: TryTarget,
): void {
  const verb = exchange.req.method ?? 'GET';
  const known = knownMethods.has(verb);
  const path = withoutQuery(exchange.upstreamTarget);
  const attributes: Attributes = {
    'http.request.method': known ? verb : '_OTHER',
    'server.address': target.address,
    'server.port': target.port,
    'url.full': target.url + path,
  };
  if (!known) attributes['http.request.method_original'] = verb;
  // OpenTelemetry's HTTP conventions: set on the second try and after, each try its own span.
  if (exchange.targetsTried > 1) attributes['http.request.resend_count'] = exchange.targetsTried - 1;
  if (exchange.target !== null) attributes['quotagate.upstream.target'] = exchange.target;
  const name = grpcClientSpanName(exchange, path, attributes) ?? (known ? verb : 'HTTP');
  const span = trace.child(name, 'client', attributes);
  exchange.clientSpan = span;
  trace.propagate(exchange.upstreamFields, span);
}

/**
 * Ends the open client span, if any, with how its try ended: the answer's status (a 4xx or 5xx marks a
 * client span failed, as the HTTP conventions have it), a call's gRPC status (any but OK fails it), the
 * upstream's outcome, and for a failure its error. A try whose client left (or that the gateway cut) is
 * no failure of the upstream: its span says `client_aborted`, its status unset.
 */
export function endClientSpan(exchange: Exchange & ClientSpans, how: TryEnd, statusCode: number): void {
  const span = exchange.clientSpan;
  if (span === null) return;
  exchange.clientSpan = null;
  const failed = typeof how !== 'string';
  const outcome: ProxyOutcome = failed ? failureOutcome(how, statusCode > 0) : how;
  const attributes: Attributes = { 'quotagate.upstream.outcome': outcome };
  if (statusCode > 0) attributes['http.response.status_code'] = statusCode;
  let errorType = failed ? ((how as NodeJS.ErrnoException).code ?? outcome) : null;
  if (errorType === null && statusCode >= 400) errorType = String(statusCode);
  if (outcome === 'completed') errorType ??= addUpstreamGrpcStatus(exchange, statusCode, attributes);
  if (errorType !== null) {
    attributes['error.type'] = errorType;
    span.setStatus({ code: statusError, message: failed ? how.message : errorType });
  }
  span.setAttributes(attributes);
  span.end();
}
