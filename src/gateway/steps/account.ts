import { withoutQuery } from '../../kit/normalize-path.js';
import { clientAddress } from '../../upstream/fields/forwarded.js';
import type { Exchange, ProxyOutcome } from '../../upstream/upstream-proxy.js';
import { grpcStatusGiven } from '../answers/grpc.js';
import type { UsageEntry } from '../../quota/usage-history.js';
import type { ExchangeRecord } from '../record.js';
import { endServerSpan } from '../server-span.js';
import { chargeBytes, chargeUnits } from './charge.js';
import type { StepContext } from './context.js';

/**
 * The access line's status of a request whose client left before any answer was sent to it: none was,
 * and nginx's "client closed request" is what log readers know it by.
 */
const clientLeftStatus = 499;

/**
 * Step 7, the one way every exchange ends, once its response has closed (or a WebSocket's socket),
 * whatever ended it: answered, refused, cut, failed or left. Guarded, so that it runs once. It frees the
 * concurrency slots, charges the bytes the exchange moved, then logs and counts it. An answer still read
 * for its units after its client left keeps its slots and its place in flight until that reading is over
 * (`finish`, from `restOfAnswerRead`), and is charged its units then.
 */
export function account(context: StepContext, record: ExchangeRecord): void {
  if (record.accounted) return;
  record.accounted = true;
  const elapsedMs = context.clock.monotonic() - record.arrivedAt;
  // The client left before its answer was whole: the upstream exchange is of no use to anyone, but for
  // what it costs when a throttleunits restriction charges it (its answer is then read to its end).
  const chargedLater = record.unitCounters.length > 0 && record.readRestOfAnswer(context.restOfAnswerRead);
  if (!chargedLater) {
    // Slots first: no verdict still pending may take one for an exchange whose upstream is gone.
    record.end();
    record.abandonUpstream();
    // A try still open ends with its exchange, whose client's side has closed (each way a try ends
    // tells it first: this is for a way that does not).
    record.endTry('client_aborted');
  }
  const { res } = record;
  // Closed before any answer was sent, or even decided: the client left (nginx logs the same as 499).
  const leftUnanswered = record.status === 0 && !res.headersSent && !res.writableFinished;
  const outcome = record.forwarded ? record.outcome() : leftUnanswered ? 'client_aborted' : null;
  context.openExchanges.delete(record);
  if (record.forwarded && record.byteCounters.length > 0) chargeBytes(context, record);
  // An upstream that failed before its head, while the client waited, was answered by the gateway: no units.
  const units =
    !chargedLater && record.responseHeaders && record.unitCounters.length > 0
      ? chargeUnits(context, record)
      : 0;
  const status = leftUnanswered ? clientLeftStatus : record.status || res.statusCode;
  if (context.accessLog && sampled(context, record, status))
    writeAccessLine(context, record, status, outcome, elapsedMs);
  count(context, record, status, outcome, elapsedMs);
  if (record.trace !== null) endServerSpan(record, status, outcome);
  countUsage(context, record, units);
  record.ruleSet.leave();
  // An answer still read for its units keeps a shutdown waiting, within its grace period.
  if (!chargedLater) finish(context, record);
}

/**
 * The rest of the answer of a client that left early has been read, or could not be: the upstream's work
 * is over, so its concurrency slots are free, and its units are charged. Shared by every record.
 */
export function restOfAnswerRead(context: StepContext, exchange: Exchange): void {
  const record = exchange as ExchangeRecord;
  record.end();
  const units = chargeUnits(context, record);
  // Its request is in the history already (`account`): its units join the same line.
  const line = units > 0 ? historyLine(context, record) : null;
  if (line !== null) line.units += units;
  finish(context, record);
}

/**
 * The usage history's line of a request, when the history is on and the quota check judged the request:
 * admitted (it went upstream) or refused (429). A request refused before (401, 404, 413, a store that
 * could not decide) or to the usage path is in no line.
 */
function historyLine(context: StepContext, record: ExchangeRecord): UsageEntry | null {
  const { usageBook } = context;
  const { route } = record;
  if (usageBook === null || route === null || !(record.forwarded || record.quota === 'rejected')) return null;
  return usageBook.line(record.principal?.application ?? null, route.api.config.id, route.method?.id ?? null);
}

/** Adds the request to its line of the usage history: the same counts and bytes as its access line. */
function countUsage(context: StepContext, record: ExchangeRecord, units: number): void {
  const line = historyLine(context, record);
  if (line === null) return;
  if (record.forwarded) line.admitted += 1;
  else line.refused += 1;
  line.bytesIn += record.bytesIn;
  line.bytesOut += record.bytesOut + record.answeredBytes;
  line.units += units;
}

/** The exchange's work is over: one request less in flight, once. */
function finish(context: StepContext, record: ExchangeRecord): void {
  if (record.finished) return;
  record.finished = true;
  context.done();
}

/** Whether this request's access line is written: every one, but only one of N of 429 answers. */
function sampled(context: StepContext, record: ExchangeRecord, status: number): boolean {
  const every = record.ruleSet.sample429;
  if (status !== 429 || every === 1) return true;
  context.rejectedLines += 1;
  return context.rejectedLines % every === 1 % every;
}

function writeAccessLine(
  context: StepContext,
  record: ExchangeRecord,
  status: number,
  outcome: ProxyOutcome | null,
  elapsedMs: number,
): void {
  const { req, res, route, principal, ruleSet } = record;
  context.accessLog!.write({
    requestId: record.id,
    client: clientAddress(req, ruleSet.trustedPeers),
    verb: req.method ?? '',
    path: loggedPath(record.routedPath || (req.url ?? '')),
    protocol: record.version,
    api: route?.api.config.name ?? null,
    method: route?.method?.name ?? null,
    application: principal?.application ? ruleSet.applications.nameOf(principal.application) : null,
    subject: principal?.subject ?? null,
    unvalidated: record.unvalidated,
    status,
    bytesIn: record.bytesIn,
    bytesOut: record.bytesOut + record.answeredBytes,
    upstreamMs: record.upstreamMs === null ? null : Math.round(record.upstreamMs * 100) / 100,
    target: record.target,
    tried: record.targetsTried,
    outcome,
    quota: record.quota,
    refusedBy: record.refusedBy,
    reason: record.reason,
    ms: Math.round(elapsedMs * 100) / 100,
    sampled: status === 429 ? ruleSet.sample429 : 1,
    webSocket: record.webSocket ? (record.webSocket.endedBy ?? 'closed') : null,
    endedBy: record.cutBy,
    grpcStatus: record.readsGrpc() ? grpcStatusGiven(res) : null,
    traceId: record.trace === null ? null : record.trace.traceId,
  });
}

/** The request's metrics: its status and time, and its upstream's failure, by API and method. */
function count(
  context: StepContext,
  record: ExchangeRecord,
  status: number,
  outcome: ProxyOutcome | null,
  elapsedMs: number,
): void {
  const { route } = record;
  const api = route?.api.label ?? 'none';
  const method = route?.method ? route.api.methodLabels.get(route.method.id)! : 'none';
  // A WebSocket's time in the request histogram is its opening's (until the 101), not how long it stayed open.
  const requestMs = record.webSocket
    ? record.forwardedAt - record.arrivedAt + (record.upstreamMs ?? 0)
    : elapsedMs;
  context.metrics.request(api, method, status, requestMs / 1000);
  if (outcome && outcome !== 'completed' && outcome !== 'client_aborted') {
    context.metrics.upstreamErrors.inc({ api, outcome });
  }
}

/** Paths in the access log: without the query (it may carry tokens), and at most this long. */
const longestLoggedPath = 1_024;
const loggedPath = (target: string): string => {
  const path = withoutQuery(target);
  return path.length > longestLoggedPath ? `${path.slice(0, longestLoggedPath)}…` : path;
};
