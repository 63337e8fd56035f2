import { AnswerBodyUnits, askForIdentity } from '../answer-units.js';
import { announcesBody } from '../edge/request-screening.js';
import { appendForwardedFields, peerAddress } from '../../upstream/fields/forwarded.js';
import { appendEndToEndRequestFields, takesTrailers } from '../../upstream/fields/hop-by-hop.js';
import type { ExchangeRecord } from '../record.js';
import type { StepContext } from './context.js';

/**
 * Step 6, the last before the answer: hands the admitted request to the upstream proxy at its upstream
 * target, with the upstream head prepared, and puts it on the open exchanges. A client that waited for
 * `100 Continue` is invited to send its body only then (upstream/upstream-proxy.ts).
 */
export function forward(context: StepContext, record: ExchangeRecord): false {
  const { res, route } = record;
  // The client left while auth or the quota check was pending: its request has been logged already.
  if (res.destroyed) return false;
  prepareUpstreamFields(record);
  if (record.unitCounters.length > 0) record.bodyWatch = AnswerBodyUnits.of(record.unitCounters);
  if (record.bodyWatch !== null) askForIdentity(record.upstreamFields);
  context.openExchanges.add(record);
  context.proxy.forward(record, route!.api);
  return false;
}

/** The upstream request's fields (the proxy adds its Host), and whether a body follows them. */
export function prepareUpstreamFields(record: ExchangeRecord): void {
  const { req, ruleSet, upstreamFields } = record;
  const peerTrusted = ruleSet.trustedPeers.trusts(peerAddress(req));
  const { headers } = req;
  appendEndToEndRequestFields(
    headers,
    ruleSet.dropped[peerTrusted ? 'trusted' : 'untrusted'],
    ruleSet.owned,
    upstreamFields,
    record.countedFields,
  );
  record.countsBytes = record.byteCounters.length > 0;
  appendForwardedFields(req, upstreamFields, peerTrusted);
  if (record.principal?.upstreamFields) upstreamFields.push(...record.principal.upstreamFields);
  upstreamFields.push('x-request-id', record.id);
  // W3C Trace Context: a recorded exchange's each try names its own client span as the upstream's parent
  // when it starts (client-span.ts); a sampled-out one's fields are written once, here. Baggage goes on
  // as the client sent it.
  if (record.trace !== null && !record.trace.recording) record.trace.propagate(upstreamFields);
  // RFC 9110 §10.1.4: the upstream may send trailers only to a client that takes them.
  if (takesTrailers(req)) {
    record.relaysTrailers = true;
    upstreamFields.push('te', 'trailers');
  }
  record.hasBody = announcesBody(req);
  // A request that declares no body goes with `Content-Length: 0` unless it is a GET or HEAD, as Node
  // frames a request whose end it is told without a body (it would send an empty chunked one).
  const verb = req.method;
  if (!record.hasBody && headers['content-length'] === undefined && verb !== 'GET' && verb !== 'HEAD')
    upstreamFields.push('content-length', '0');
}
