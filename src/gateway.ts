import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { AuthResult, Authenticator, Principal } from './auth/authenticator.js';
import { normalizeTarget } from './catalog/normalize-path.js';
import type { RouteMatch, Router } from './catalog/router.js';
import { sendError, type DataPlaneErrorCode } from './errors.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import { applyForwardedHeaders, forwardedFields, peerIdentityFields } from './proxy/forwarded-headers.js';
import { endToEndRequestHeaders, hopByHopAndFramingFields } from './proxy/hop-by-hop.js';
import type { TrustedPeers } from './proxy/trust-proxy.js';
import { outcomeOf, type Exchange, type UpstreamProxy } from './proxy/upstream-proxy.js';
import type { CounterSpec } from './limiter/counter-store.js';
import type { Limiter, LimiterVerdict } from './limiter/limiter.js';
import { closestToLimit, rateLimitFields } from './limiter/rate-limit-headers.js';
import type { ApplicableRestriction, QuotaIndex } from './quota/quota-index.js';
import { requestIdOf } from './request-id.js';
import { announcesBody, screeningProblem } from './request-screening.js';

export interface GatewayParts {
  router: Router;
  authenticator: Authenticator;
  proxy: UpstreamProxy;
  trustedPeers: TrustedPeers;
  forwardCredentials: boolean;
  /** The quota definitions as compiled now; they change while the gateway runs. */
  quotas: () => QuotaIndex;
  limiter: Limiter;
  logger: Logger;
  metrics: Metrics;
}

/** What one request did, for the access log and the metrics. */
class RequestRecord {
  route: RouteMatch | null = null;
  principal: Principal | null = null;
  /** The auth plugin declined to validate the URL, so the request went on unauthenticated. */
  unvalidated = false;
  exchange: Exchange | null = null;
  /** How the quota check ended, for the access log. */
  quota: 'allowed' | 'rejected' | 'unavailable' | null = null;
  /** Response fields the gateway adds, as name, value pairs (lower-case names). */
  readonly fields: string[];
  /** Byte counters (throttlemb) to charge with what the exchange moved beyond the declared body. */
  byteCounters: readonly ApplicableRestriction[] = [];
  declaredBytes = 0;
  /** The client waits for `100 Continue` before it sends the body: sent only once the request is admitted. */
  expectsContinue = false;

  constructor(
    readonly id: string,
    readonly startedAt: number,
  ) {
    this.fields = ['x-request-id', id];
  }
}

const isPromise = <T>(value: T | Promise<T>): value is Promise<T> => value instanceof Promise;

/**
 * The per-request pipeline of the data plane, in order: request id, path normalization, routing,
 * authentication, quota check, forwarding; then, once the response has closed, the byte charge and one
 * access-log line. Work that can finish at once does: no promise is awaited that is not pending.
 */
export class Gateway {
  private inFlight = 0;
  private draining = false;
  private idleWaiters: Array<() => void> = [];

  /** Request fields that never go upstream, besides the hop-by-hop ones. */
  private readonly dropped: Record<'trusted' | 'untrusted', ReadonlySet<string>>;
  /** Fields the gateway sets, drops or frames by: their underscore spellings never go upstream. */
  private readonly owned: ReadonlySet<string>;

  constructor(private readonly parts: GatewayParts) {
    // The gateway answers `Expect: 100-continue` itself, once the request is admitted; the upstream must
    // not answer it again.
    const always = ['expect', ...(parts.forwardCredentials ? [] : ['authorization', 'apikey'])];
    this.dropped = { trusted: new Set(always), untrusted: new Set([...always, ...peerIdentityFields]) };
    this.owned = new Set([
      ...this.dropped.untrusted,
      ...hopByHopAndFramingFields,
      ...forwardedFields,
      'x-request-id',
    ]);
  }

  /** The `request` listener of the data-plane servers. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.start(req, res, false);
  };

  /**
   * The `checkContinue` listener of the data-plane servers (Node emits it for `Expect: 100-continue`):
   * Node would otherwise answer `100 Continue` at once, inviting the body of a request that is not yet
   * authenticated.
   */
  readonly handleExpectingContinue = (req: IncomingMessage, res: ServerResponse): void => {
    this.start(req, res, true);
  };

  private start(req: IncomingMessage, res: ServerResponse, waitsForContinue: boolean): void {
    const record = new RequestRecord(requestIdOf(req), performance.now());
    record.expectsContinue = waitsForContinue;
    this.inFlight += 1;
    res.once('close', () => this.finish(req, res, record));
    if (this.draining) record.fields.push('connection', 'close');
    try {
      const pending = this.pipeline(req, res, record);
      if (pending) pending.catch((error: unknown) => this.failed(req, res, record, error));
    } catch (error) {
      this.failed(req, res, record, error);
    }
  }

  /** From now on every response asks the client to close its connection. */
  startDraining(): void {
    this.draining = true;
  }

  /** Resolves true when no request is in flight, or false when `timeoutMs` passes first. */
  waitForIdle(timeoutMs: number): Promise<boolean> {
    if (this.inFlight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  private failed(req: IncomingMessage, res: ServerResponse, record: RequestRecord, error: unknown): void {
    this.parts.logger.error({ err: error, requestId: record.id }, 'request pipeline failed');
    this.refuse(req, res, record, 'internal_error');
  }

  /**
   * Answers an error instead of forwarding. A body the client announced has not been read: the
   * connection closes after the answer rather than read it, or take its first bytes for the next request
   * when a client that waited for `100 Continue` sends no body.
   */
  private refuse(
    req: IncomingMessage,
    res: ServerResponse,
    record: RequestRecord,
    code: DataPlaneErrorCode,
    extra: readonly string[] = [],
  ): void {
    const closing =
      announcesBody(req) && !record.fields.includes('connection') ? ['connection', 'close'] : [];
    sendError(res, code, [...record.fields, ...extra, ...closing]);
  }

  /** Screens, routes and authenticates; returns a promise only when authentication has to wait. */
  private pipeline(req: IncomingMessage, res: ServerResponse, record: RequestRecord): Promise<void> | void {
    const target = normalizeTarget(req.url ?? '', req.headers.host);
    const problem = target.ok ? screeningProblem(req, target.query) : target.reason;
    if (!target.ok || problem) {
      this.parts.logger.debug({ requestId: record.id, reason: problem }, 'request refused before routing');
      return this.refuse(req, res, record, 'bad_request');
    }
    const route = this.parts.router.match(
      req.method ?? 'GET',
      target.segments,
      target.trailingSlash,
      target.query,
    );
    if (!route) return this.refuse(req, res, record, 'not_found');
    record.route = route;
    if (!route.method && !route.api.config.passUndeclared) {
      // Only declared operations are exposed: another path is 404, another verb of a declared path 405.
      const allowed = this.parts.router.allowedVerbs(route);
      return allowed.length === 0
        ? this.refuse(req, res, record, 'not_found')
        : this.refuse(req, res, record, 'method_not_allowed', ['allow', allowed.join(', ')]);
    }
    // Authentication (an auth plugin's matchURL among it) sees the path that was routed and goes upstream.
    req.url = route.path;

    const auth = this.parts.authenticator.authenticate(req, res);
    if (isPromise(auth)) return auth.then((result) => this.authenticated(req, res, record, result));
    return this.authenticated(req, res, record, auth);
  }

  /** Checks the quotas, then forwards; returns a promise only when the quota check has to wait. */
  private authenticated(
    req: IncomingMessage,
    res: ServerResponse,
    record: RequestRecord,
    auth: AuthResult,
  ): Promise<void> | void {
    if (res.headersSent || res.writableEnded) return;
    if (!auth.ok) {
      const challenge = auth.reject === 'unauthorized' ? auth.challenge : undefined;
      return this.refuse(req, res, record, auth.reject, challenge ? ['www-authenticate', challenge] : []);
    }
    record.principal = auth.principal;
    record.unvalidated = auth.unvalidated === true;

    const route = record.route!;
    const verb = req.method ?? 'GET';
    const restrictions = this.parts
      .quotas()
      .applicableTo(
        route.api.config.id.toLowerCase(),
        route.method?.id.toLowerCase() ?? null,
        verb === 'HEAD' ? 'GET' : verb,
        auth.principal?.application,
      );
    if (restrictions.length === 0) return this.forward(req, res, record);
    record.declaredBytes = declaredLength(req);
    record.byteCounters = restrictions.filter((restriction) => restriction.type === 'throttlemb');
    // A body larger than a whole window's bytes can never fit: no Retry-After would help.
    if (record.byteCounters.some((restriction) => restriction.limit < record.declaredBytes))
      return this.refuse(req, res, record, 'payload_too_large');
    const specs = counterSpecs(restrictions, record.declaredBytes);
    const verdict = this.parts.limiter.consume(specs);
    if (isPromise(verdict)) {
      return verdict.then((settled) => {
        if (this.admitted(req, res, record, restrictions, specs, settled)) this.forward(req, res, record);
      });
    }
    if (this.admitted(req, res, record, restrictions, specs, verdict)) this.forward(req, res, record);
  }

  private forward(req: IncomingMessage, res: ServerResponse, record: RequestRecord): void {
    // The client left while auth or the quota check was pending: its request has been logged already.
    if (res.destroyed) return;
    const route = record.route!;
    this.prepareUpstreamHeaders(req, record.id);
    if (record.expectsContinue) res.writeContinue();
    record.exchange = this.parts.proxy.forward(req, res, route.api, route.upstreamTarget, record.fields);
  }

  /** Applies a counter verdict: adds the rate-limit fields, and answers 429 or 503 itself when it must. */
  private admitted(
    req: IncomingMessage,
    res: ServerResponse,
    record: RequestRecord,
    restrictions: readonly ApplicableRestriction[],
    specs: readonly CounterSpec[],
    verdict: LimiterVerdict,
  ): boolean {
    if (verdict === 'unavailable') {
      record.quota = 'unavailable';
      this.refuse(req, res, record, 'service_unavailable');
      return false;
    }
    if (verdict.outOfRoom) {
      // This gateway's counters are at their memory bound: a caller without a counter cannot be counted.
      record.quota = 'unavailable';
      const retryAfter = String(Math.ceil(verdict.retryAfterMs / 1000));
      this.refuse(req, res, record, 'service_unavailable', ['retry-after', retryAfter]);
      return false;
    }
    const { metrics } = this.parts;
    restrictions.forEach((restriction, i) => {
      const full = (verdict.states[i]?.used ?? 0) + specs[i]!.need > restriction.limit;
      if (verdict.allowed || full) metrics.quotaDecision(restriction, verdict.allowed);
    });
    if (verdict.states.length > 0) {
      const closest = closestToLimit(restrictions, verdict.states);
      record.fields.push(...rateLimitFields(restrictions[closest]!, verdict.states[closest]!));
    }
    record.quota = verdict.allowed ? 'allowed' : 'rejected';
    if (!verdict.allowed) {
      const retryAfter = String(Math.max(1, Math.ceil(verdict.retryAfterMs / 1000)));
      this.refuse(req, res, record, 'quota_exceeded', ['retry-after', retryAfter]);
    }
    return verdict.allowed;
  }

  private prepareUpstreamHeaders(req: IncomingMessage, requestId: string): void {
    const peerTrusted = this.parts.trustedPeers.trusts(req.socket.remoteAddress);
    const headers = endToEndRequestHeaders(
      req.headers,
      this.dropped[peerTrusted ? 'trusted' : 'untrusted'],
      this.owned,
    );
    // `0100` is 100 to Node and to most upstreams, and 64 to one that reads a leading zero as octal.
    const length = headers['content-length'];
    if (length !== undefined && length.length > 1 && length.startsWith('0'))
      headers['content-length'] = length.replace(/^0+(?=\d)/, '');
    applyForwardedHeaders(req, headers, peerTrusted);
    headers['x-request-id'] = requestId;
    req.headers = headers;
  }

  /** Once the response has closed: charges the bytes it moved, then logs and counts it. */
  private finish(req: IncomingMessage, res: ServerResponse, record: RequestRecord): void {
    const elapsedMs = performance.now() - record.startedAt;
    const { route, exchange } = record;
    const outcome = exchange ? outcomeOf(exchange, res) : null;
    if (exchange && record.byteCounters.length > 0) this.chargeBytes(record, exchange);
    const status = exchange?.status || res.statusCode;
    const { logger, metrics } = this.parts;
    if (logger.isLevelEnabled('info')) {
      logger.info(
        {
          requestId: record.id,
          verb: req.method,
          api: route?.api.config.name ?? null,
          method: route?.method?.name ?? null,
          subject: record.principal?.subject ?? null,
          ...(record.unvalidated ? { unvalidated: true } : {}),
          status,
          bytesIn: exchange?.bytesIn ?? 0,
          bytesOut: exchange?.bytesOut ?? 0,
          upstreamMs:
            exchange?.upstreamMs === null || !exchange ? null : Math.round(exchange.upstreamMs * 100) / 100,
          outcome,
          quota: record.quota,
          ms: Math.round(elapsedMs * 100) / 100,
        },
        'request',
      );
    }
    const apiId = route?.api.config.id ?? 'none';
    metrics.request(apiId, route?.method?.id ?? 'none', status, elapsedMs / 1000);
    if (outcome && outcome !== 'completed' && outcome !== 'client_aborted') {
      metrics.upstreamErrors.inc({ api: apiId, outcome });
    }
    this.inFlight -= 1;
    if (this.inFlight === 0) {
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  /** Request bytes beyond those declared (and charged up front), and every response byte. */
  private chargeBytes(record: RequestRecord, exchange: Exchange): void {
    const amount = Math.max(0, exchange.bytesIn - record.declaredBytes) + exchange.bytesOut;
    if (amount === 0) return;
    const additions = record.byteCounters.map((restriction) => ({
      key: restriction.counterKey,
      windowMs: restriction.windowMs,
      amount,
    }));
    this.parts.limiter.add(additions).catch((error: unknown) => {
      this.parts.logger.error({ err: error, requestId: record.id }, 'charging measured bytes failed');
    });
  }
}

/** A throttle charges one message; a throttlemb charges the declared body and needs room for at least a byte. */
function counterSpecs(restrictions: readonly ApplicableRestriction[], declaredBytes: number): CounterSpec[] {
  return restrictions.map(({ counterKey, limit, windowMs, type }) => {
    const bytes = type === 'throttlemb';
    return {
      key: counterKey,
      limit,
      windowMs,
      cost: bytes ? declaredBytes : 1,
      need: bytes ? Math.max(declaredBytes, 1) : 1,
    };
  });
}

/**
 * The request's declared body length, or 0 when it declares none (chunked). Node has framed the body by
 * the same digits, leading zeros and all; beyond 2^53 the number is approximate, and larger than any
 * limit anyway.
 */
function declaredLength(req: IncomingMessage): number {
  const header = req.headers['content-length'];
  return header !== undefined && /^\d+$/.test(header) ? Number(header) : 0;
}
