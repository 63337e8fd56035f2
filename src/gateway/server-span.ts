import type { Attributes } from '@opentelemetry/api';
import { withoutQuery } from '../kit/normalize-path.js';
import type { Tracing } from '../observe/tracing.js';
import { clientAddress } from '../upstream/fields/forwarded.js';
import type { ProxyOutcome } from '../upstream/upstream-proxy.js';
import { addGrpcSpanAttributes } from './answers/grpc.js';
import { knownMethods } from './http-methods.js';
import type { ExchangeRecord } from './record.js';

const protocolVersions = { 'HTTP/1.0': '1.0', 'HTTP/1.1': '1.1', 'HTTP/2': '2' } as const;

/**
 * Starts the exchange's trace, from the client's `traceparent` when it sent a valid one. Its name is the
 * request's method until the end names its route: a client's own method name never names a span.
 */
export function startTrace(tracing: Tracing, record: ExchangeRecord): void {
  const verb = record.req.method ?? '';
  record.trace = tracing.start(record.req.headers, knownMethods.has(verb) ? verb : 'HTTP');
}

/**
 * Ends the server span of an exchange, once, where its access line is written (`account`): named by the
 * catalog's method (`GET /pets/{petId}`), with the HTTP semantic conventions' attributes and the
 * gateway's decision. A refusal (401, 413, 429) leaves the status unset, as the conventions have it for a
 * server's 4xx, and says why in attributes and a `quotagate.refused` event; a 5xx marks it failed.
 */
export function endServerSpan(record: ExchangeRecord, status: number, outcome: ProxyOutcome | null): void {
  const trace = record.trace!;
  // A sampled-out exchange's span records nothing: ending it would do nothing either.
  if (!trace.recording) return;
  const { span } = trace;
  const { req, route, principal, ruleSet } = record;
  const verb = req.method ?? '';
  const known = knownMethods.has(verb);
  const template = route?.method ? route.api.config.basePath + route.method.path : null;
  span.updateName(template === null ? (known ? verb : 'HTTP') : `${known ? verb : 'HTTP'} ${template}`);
  const attributes: Attributes = {
    'http.request.method': known ? verb : '_OTHER',
    'http.response.status_code': status,
    'network.protocol.version': protocolVersions[record.version],
    'url.path': withoutQuery(record.routedPath || (req.url ?? '')),
    'client.address': clientAddress(req, ruleSet.trustedPeers),
    'quotagate.request_id': record.id,
    'quotagate.form': record.form,
    'http.request.body.size': record.bytesIn,
    'http.response.body.size': record.bytesOut + record.answeredBytes,
  };
  if (!known) attributes['http.request.method_original'] = verb;
  if (template !== null) attributes['http.route'] = template;
  if (route) attributes['quotagate.api'] = route.api.config.name;
  if (route?.method) attributes['quotagate.method'] = route.method.name;
  if (principal?.application)
    attributes['quotagate.application'] = ruleSet.applications.nameOf(principal.application);
  addDecision(record, attributes, status, outcome);
  if (record.readsGrpc()) addGrpcSpanAttributes(record.res, attributes);
  span.setAttributes(attributes);
  if (record.refusedWith !== null)
    span.addEvent('quotagate.refused', {
      'quotagate.refusal.code': record.refusedWith,
      ...(record.reason === null ? {} : { 'quotagate.refusal.reason': record.reason }),
    });
  if (status >= 500) {
    span.setAttribute('error.type', String(status));
    trace.fail(record.refusedWith ?? outcome ?? String(status));
  }
  span.end();
}

/** What the gateway decided and why, the restrictions it checked, and the target that answered. */
function addDecision(
  record: ExchangeRecord,
  attributes: Attributes,
  status: number,
  outcome: ProxyOutcome | null,
): void {
  attributes['quotagate.decision'] = decisionOf(record, status);
  if (record.refusedWith !== null) attributes['quotagate.refusal.code'] = record.refusedWith;
  if (record.reason !== null) attributes['quotagate.refusal.reason'] = record.reason;
  if (record.quota !== null) attributes['quotagate.quota'] = record.quota;
  if (record.refusedBy !== null) attributes['quotagate.refused_by'] = record.refusedBy;
  const { fields } = record;
  for (let i = 0; i < fields.length; i += 2) {
    // The restrictions checked (RateLimit-Policy) and the room each has left (RateLimit: r=remaining).
    if (fields[i] === 'ratelimit-policy') attributes['quotagate.ratelimit.policy'] = fields[i + 1]!;
    else if (fields[i] === 'ratelimit') attributes['quotagate.ratelimit'] = fields[i + 1]!;
  }
  if (record.target !== null) attributes['quotagate.upstream.target'] = record.target;
  if (outcome !== null) attributes['quotagate.upstream.outcome'] = outcome;
  if (record.cutBy !== null) attributes['quotagate.ended_by'] = record.cutBy;
  if (record.webSocket) attributes['quotagate.websocket'] = record.webSocket.endedBy ?? 'closed';
}

/**
 * `admitted` (it went upstream), `refused` (the gateway answered with one of its errors), `client_left`
 * (before any answer: 499), or `answered` (the gateway's own answer, the usage path's).
 */
function decisionOf(record: ExchangeRecord, status: number): string {
  if (record.forwarded) return 'admitted';
  if (record.refusedWith !== null) return 'refused';
  return status === 499 ? 'client_left' : 'answered';
}
