import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Span } from '@opentelemetry/api';
import type { AuthRefusalReason, AuthResult, Authenticator, Principal } from '../auth/authenticator.js';
import type { RouteMatch } from '../catalog/router.js';
import type { CounterState, SlotRelease } from '../limiter/counter-store.js';
import type { ApplicableRestriction } from '../quota/quota-index.js';
import { Exchange, type ProxyOutcome } from '../upstream/upstream-proxy.js';
import type { TryEnd, TryTarget } from '../upstream/exchange.js';
import type { Clock } from '../kit/clock.js';
import type { ExchangeTrace } from '../observe/tracing.js';
import type { AnswerBodyUnits } from './answer-units.js';
import { endClientSpan, startClientSpan, type ClientSpans } from './client-span.js';
import { cutMessages, cutResponse, type ExchangeCut } from './answers/cut.js';
import type { DataPlaneErrorCode } from './answers/errors.js';
import {
  answerUpstreamFailure,
  missingGrpcStatus,
  noteUpstreamGrpcStatus,
  relayTrailersOnly,
} from './answers/upstream-reports.js';
import type { MeteredBytes, OpenExchange, QuotaOutcome } from './open-exchanges.js';
import type { RuleSet } from './rule-set.js';

/** The HTTP version a request came in, as the access line spells it: set once, by the edge. */
export type HttpVersion = 'HTTP/1.0' | 'HTTP/1.1' | 'HTTP/2';

/**
 * What kind of exchange the request opens, set once by the edge that took it: an ordinary `http`
 * request, a `call` its edge answers in gRPC's form, a WebSocket `opening`, or an `upgrade` to a protocol
 * the gateway does not switch to (answered as any request). The steps read this, never the request's
 * version, `Upgrade` or content type.
 */
export type ExchangeForm = 'http' | 'call' | 'opening' | 'upgrade';

const noRestrictions: readonly ApplicableRestriction[] = [];
const noStates: readonly CounterState[] = [];
const noFields: readonly string[] = [];

/**
 * One request through the pipeline, the only object the gateway makes per request. Its fields come in
 * three groups, each written by the steps named:
 * - the request's facts: its id, edge form and version (edge), its route, routed path and upstream target
 *   (route), its principal (authenticate); fixed once `route` has run, but for the principal;
 * - the decision: how its quotas and its rules judged it (admit, the tick), why it was refused or cut;
 * - the measures: what the exchange moved and when (`Exchange`, written as it runs).
 * It is undici's handler of the upstream exchange (`Exchange`), and a node of the open exchanges' list.
 */
export class ExchangeRecord
  extends Exchange<AnswerBodyUnits, MeteredBytes>
  implements OpenExchange, ClientSpans
{
  // Facts.
  /** The rules in force when the request came: it keeps them to its end, across reloads. */
  readonly ruleSet: RuleSet;
  form: ExchangeForm = 'http';
  version: HttpVersion = 'HTTP/1.1';
  route: RouteMatch<Authenticator> | null = null;
  /**
   * The path as routed, normalized, with its query (the usage path's too): what authentication and the
   * access line see. Empty until `route` has matched it.
   */
  routedPath = '';
  /** The request reached the usage path: `usage` answers it, after `authenticate`. */
  readsUsage = false;
  principal: Principal | null = null;
  /** The auth plugin declined to validate the URL, so the request went on unauthenticated. */
  unvalidated = false;
  /** The body length the request declared (0 when none, or chunked). */
  declaredBytes = 0;
  /** The header fields its quotas count it by: no other spelling of them goes upstream. */
  countedFields: readonly string[] = noFields;
  /**
   * Its trace when tracing is on (null when off: one check): the server span, started as it came and
   * ended where its access line is written, and the parent of the child spans its steps start.
   */
  trace: ExchangeTrace | null = null;
  /** The upstream client span of the try in flight, when its trace records (client-span.ts). */
  clientSpan: Span | null = null;

  // Decision.
  /** How the quota check ended, for the access log. */
  quota: QuotaOutcome | null = null;
  /** The restrictions that refused it, or would have (shadow), `<quota id>/<index>`, for the access log. */
  refusedBy: string | null = null;
  /** The byte restrictions that admitted it: charged with what it moved beyond the declared body. */
  byteCounters: readonly ApplicableRestriction[] = noRestrictions;
  /** The states its admission left its enforced byte counters in: the rooms it starts from. */
  byteStates: ReadonlyArray<CounterState | undefined> = noStates;
  /** The throttleunits restrictions that admitted it: charged what the upstream's answer says it cost. */
  unitCounters: readonly ApplicableRestriction[] = noRestrictions;
  /** The code of the gateway's own error answer, when it gave one (its trace says it). */
  refusedWith: DataPlaneErrorCode | null = null;
  /** Why the gateway refused it, when its answer says so, for the access log. */
  reason: AuthRefusalReason | null = null;
  /** Why the gateway ended it while it ran (not a WebSocket: its link says), for the access log. */
  cutBy: ExchangeCut | null = null;

  // Bookkeeping of its end.
  /** The concurrency slots it holds while in flight, and where each was taken. */
  private slots: Array<{ by: SlotRelease; keys: readonly string[] }> | null = null;
  /** Its upstream's work is over (`end`): a slot taken from now on is freed at once. */
  private ended = false;
  /** `account` has run: the client's side has closed, and the access line is written. */
  accounted = false;
  /** `finish` has run: slots freed, units charged, one request less in flight. */
  finished = false;
  /** Its neighbours on the list of open exchanges, while it is forwarded and not yet ended. */
  previousOpen: OpenExchange | null = null;
  nextOpen: OpenExchange | null = null;

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    readonly id: string,
    expectsContinue: boolean,
    ruleSet: RuleSet,
  ) {
    super(req, res);
    this.expectsContinue = expectsContinue;
    this.ruleSet = ruleSet;
    this.fields.push('x-request-id', id);
  }

  /** Holds slots until the upstream's work is over; a verdict that came after that frees them at once. */
  holdSlots(by: SlotRelease | undefined, keys: readonly string[]): void {
    if (!by || keys.length === 0) return;
    if (this.ended) by.release(keys);
    else (this.slots ??= []).push({ by, keys });
  }

  /**
   * The upstream's work is over: its slots are free from now on. Called before the upstream is abandoned,
   * so that no verdict still pending can take a slot for an exchange that is gone.
   */
  end(): void {
    this.ended = true;
    if (this.slots === null) return;
    for (const { by, keys } of this.slots) by.release(keys);
    this.slots = null;
  }

  /**
   * Request bytes beyond those declared (and charged up front), and every response byte, less what was
   * charged while it ran; of a WebSocket, its frame bytes each way.
   */
  unchargedBytes(): number {
    return Math.max(0, this.bytesIn - this.declaredBytes) + this.bytesOut - this.chargedBytes;
  }

  /**
   * Its request authenticated again, by the authenticator it came under (a reload does not change it),
   * on the path that was routed the first time.
   */
  authenticateAgain(): AuthResult | Promise<AuthResult> {
    return this.authenticator().authenticate(this.req, this.res, this.routedPath);
  }

  /** The authenticator of its operation, compiled on its route, or the usage path's. */
  authenticator(): Authenticator {
    return this.route === null ? this.ruleSet.usageAuthenticator : this.route.guard;
  }

  override tryStarted(target: TryTarget): void {
    if (this.trace !== null && this.trace.recording) startClientSpan(this.trace, this, target);
  }

  override tryEnded(how: TryEnd, statusCode: number): void {
    if (this.clientSpan !== null) endClientSpan(this, how, statusCode);
  }

  /** An exchange the gateway cut is the gateway's doing, not the client's abort. */
  override outcome(): ProxyOutcome {
    return this.cutBy === null ? super.outcome() : this.upstreamOutcome;
  }

  running(): boolean {
    if (this.form === 'opening') return this.webSocket !== null && this.webSocket.endedBy === null;
    return this.cutBy === null && !this.res.writableEnded && !this.res.destroyed;
  }

  /**
   * Ends the exchange while it runs: a WebSocket with a close frame (1008, policy violation: RFC 6455
   * §7.4.1), any other with its upstream side aborted and its response ended in its form (`cutResponse`).
   */
  cut(why: ExchangeCut): void {
    if (this.webSocket) {
      this.webSocket.end(1008, cutMessages[why], why);
      return;
    }
    this.cutBy = why;
    this.abandonUpstream();
    this.answeredBytes += cutResponse(this.res, why, this.fields);
  }

  // What upstream/ reports of the exchange (`ExchangeReports`), rendered through the answers.
  answerFailure(
    timedOut: boolean,
    unreadMs: number,
    timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
  ): void {
    answerUpstreamFailure(this, timedOut, unreadMs, timers);
  }

  /** The edge found a gRPC call (`form`): its answer is read as one. */
  readsGrpc(): boolean {
    return this.form === 'call';
  }

  /** The edge found a WebSocket opening (`form`). */
  isOpening(): boolean {
    return this.form === 'opening';
  }

  grpcStatusRead(httpStatus: number, grpcStatus: string | string[] | undefined): void {
    noteUpstreamGrpcStatus(this, httpStatus, grpcStatus);
  }

  grpcStatusMissing(): readonly string[] {
    return missingGrpcStatus(this);
  }

  endTrailersOnly(head: readonly string[]): void {
    relayTrailersOnly(this, head);
  }

  /** Names a restriction that refused the request, or would have, for the access line's `refusedBy`. */
  addRefusal(restriction: ApplicableRestriction): void {
    const name = `${restriction.quotaId}/${restriction.index}`;
    this.refusedBy = this.refusedBy === null ? name : `${this.refusedBy},${name}`;
  }

  /** The client has gone, or its answer has begun or ended: no step has anything left to tell it. */
  answered(): boolean {
    return this.res.headersSent || this.res.writableEnded;
  }
}
