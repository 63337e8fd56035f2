import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Authenticator, Principal } from './auth/authenticator.js';
import { normalizeTarget } from './catalog/normalize-path.js';
import type { RouteMatch, Router } from './catalog/router.js';
import { sendError } from './errors.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import { applyForwardedHeaders } from './proxy/forwarded-headers.js';
import { endToEndRequestHeaders } from './proxy/hop-by-hop.js';
import type { TrustedPeers } from './proxy/trust-proxy.js';
import type { Exchange, UpstreamProxy } from './proxy/upstream-proxy.js';
import type { CounterSpec } from './limiter/counter-store.js';
import type { Limiter } from './limiter/limiter.js';
import { closestToLimit, rateLimitHeaders } from './limiter/rate-limit-headers.js';
import type { ApplicableRestriction, QuotaIndex } from './quota/quota-index.js';
import { requestIdOf } from './request-id.js';

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
interface RequestRecord {
  id: string;
  route: RouteMatch | null;
  principal: Principal | null;
  /** The auth plugin declined to validate the URL, so the request went on unauthenticated. */
  unvalidated: boolean;
  exchange: Exchange | null;
  /** How the quota check ended, for the access log. */
  quota: 'allowed' | 'rejected' | 'unavailable' | null;
}

/**
 * The per-request pipeline of the data plane, in order: request id, path normalization, routing,
 * authentication, forwarding; then one access-log line.
 */
export class Gateway {
  private inFlight = 0;
  private draining = false;
  private idleWaiters: Array<() => void> = [];

  /** Request fields that never go upstream, besides the hop-by-hop ones. */
  private readonly dropped: Record<'trusted' | 'untrusted', ReadonlySet<string>>;

  constructor(private readonly parts: GatewayParts) {
    // The gateway already answered any `Expect: 100-continue`; the upstream must not answer it again.
    const always = ['expect', ...(parts.forwardCredentials ? [] : ['authorization', 'apikey'])];
    this.dropped = { trusted: new Set(always), untrusted: new Set([...always, 'forwarded']) };
  }

  /** The `request` listener of the data-plane servers. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    void this.serve(req, res);
  };

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

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startedAt = performance.now();
    const closed = new Promise<void>((resolve) => res.once('close', resolve));
    this.inFlight += 1;
    const record: RequestRecord = {
      id: requestIdOf(req),
      route: null,
      principal: null,
      unvalidated: false,
      exchange: null,
      quota: null,
    };
    res.setHeader('x-request-id', record.id);
    if (this.draining) res.setHeader('connection', 'close');
    try {
      await this.pipeline(req, res, record);
    } catch (error) {
      this.parts.logger.error({ err: error, requestId: record.id }, 'request pipeline failed');
      sendError(res, 'internal_error');
    }
    await closed;
    this.finish(req, res, record, performance.now() - startedAt);
  }

  private async pipeline(req: IncomingMessage, res: ServerResponse, record: RequestRecord): Promise<void> {
    const target = normalizeTarget(req.url ?? '', req.headers.host);
    if (!target.ok) {
      this.parts.logger.debug({ requestId: record.id, reason: target.reason }, 'request target rejected');
      return sendError(res, 'bad_request');
    }
    const verb = req.method ?? 'GET';
    record.route = this.parts.router.match(verb, target.segments, target.trailingSlash, target.query);
    if (!record.route) return sendError(res, 'not_found');

    const auth = await this.parts.authenticator.authenticate(req, res);
    if (res.headersSent || res.writableEnded) return;
    if (!auth.ok) {
      const challenge = auth.reject === 'unauthorized' ? auth.challenge : undefined;
      return sendError(res, auth.reject, challenge ? { 'www-authenticate': challenge } : {});
    }
    record.principal = auth.principal;
    record.unvalidated = auth.unvalidated === true;

    const declaredBytes = declaredLength(req);
    const restrictions = this.parts
      .quotas()
      .applicableTo(
        record.route.api.config.id.toLowerCase(),
        record.route.method?.id.toLowerCase() ?? null,
        verb === 'HEAD' ? 'GET' : verb,
        auth.principal?.application,
      );
    if (restrictions.length > 0 && !(await this.admit(res, record, restrictions, declaredBytes))) return;

    this.prepareUpstreamHeaders(req, record.id);
    record.exchange = await this.parts.proxy.forward(req, res, record.route.api, record.route.upstreamTarget);

    const byteCounters = restrictions.filter((restriction) => restriction.type === 'throttlemb');
    if (byteCounters.length > 0) {
      // Request bytes beyond those declared (and charged) up front, and every response byte.
      const amount = Math.max(0, record.exchange.bytesIn - declaredBytes) + record.exchange.bytesOut;
      await this.parts.limiter.add(
        byteCounters.map((restriction) => ({
          key: restriction.counterKey,
          windowMs: restriction.windowMs,
          amount,
        })),
      );
    }
  }

  /** Checks and charges every restriction in one step; answers 429 or 503 itself when it must. */
  private async admit(
    res: ServerResponse,
    record: RequestRecord,
    restrictions: ApplicableRestriction[],
    declaredBytes: number,
  ): Promise<boolean> {
    // A throttle charges one message; a throttlemb charges the declared body and needs room for at least a byte.
    const specs: CounterSpec[] = restrictions.map(({ counterKey, limit, windowMs, type }) => {
      const bytes = type === 'throttlemb';
      return {
        key: counterKey,
        limit,
        windowMs,
        cost: bytes ? declaredBytes : 1,
        need: bytes ? Math.max(declaredBytes, 1) : 1,
      };
    });
    const verdict = await this.parts.limiter.consume(specs);
    if (verdict === 'unavailable') {
      record.quota = 'unavailable';
      sendError(res, 'service_unavailable');
      return false;
    }
    const { metrics } = this.parts;
    restrictions.forEach((restriction, i) => {
      const full = (verdict.states[i]?.used ?? 0) + specs[i]!.need > restriction.limit;
      if (verdict.allowed || full) {
        metrics.quotaDecisions.inc({
          quota: restriction.quotaId,
          restriction: String(restriction.index),
          decision: verdict.allowed ? 'allowed' : 'rejected',
        });
      }
    });
    if (verdict.states.length > 0) {
      const closest = closestToLimit(restrictions, verdict.states);
      const headers = rateLimitHeaders(restrictions[closest]!, verdict.states[closest]!);
      for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    }
    record.quota = verdict.allowed ? 'allowed' : 'rejected';
    if (!verdict.allowed) {
      sendError(res, 'quota_exceeded', {
        'retry-after': String(Math.max(1, Math.ceil(verdict.retryAfterMs / 1000))),
      });
    }
    return verdict.allowed;
  }

  private prepareUpstreamHeaders(req: IncomingMessage, requestId: string): void {
    const peerTrusted = this.parts.trustedPeers.trusts(req.socket.remoteAddress);
    const headers = endToEndRequestHeaders(req.headers, this.dropped[peerTrusted ? 'trusted' : 'untrusted']);
    applyForwardedHeaders(req, headers, peerTrusted);
    headers['x-request-id'] = requestId;
    req.headers = headers;
  }

  private finish(req: IncomingMessage, res: ServerResponse, record: RequestRecord, elapsedMs: number): void {
    const { route, exchange } = record;
    const status = exchange?.status || res.statusCode;
    const apiId = route?.api.config.id ?? 'none';
    const methodId = route?.method?.id ?? 'none';
    this.parts.logger.info(
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
        outcome: exchange?.outcome ?? null,
        quota: record.quota,
        ms: Math.round(elapsedMs * 100) / 100,
      },
      'request',
    );
    const { metrics } = this.parts;
    metrics.requests.inc({ api: apiId, method: methodId, status: String(status) });
    metrics.duration.observe({ api: apiId }, elapsedMs / 1000);
    if (exchange && exchange.outcome !== 'completed' && exchange.outcome !== 'client_aborted') {
      metrics.upstreamErrors.inc({ api: apiId, outcome: exchange.outcome });
    }
    this.inFlight -= 1;
    if (this.inFlight === 0) {
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }
}

/** The request's declared body length, or 0 when it declares none (chunked) or a malformed one. */
function declaredLength(req: IncomingMessage): number {
  const header = req.headers['content-length'];
  return header !== undefined && /^\d{1,15}$/.test(header) ? Number(header) : 0;
}
