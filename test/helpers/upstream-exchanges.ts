import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { systemClock, type Clock } from '../../src/kit/clock.js';
import { dispatch, type DispatchHost } from '../../src/upstream/dispatch.js';
import { Exchange, type AnswerBodyWatch } from '../../src/upstream/exchange.js';
import { AnswerDrains } from '../../src/upstream/handlers/drain-after-leave.js';
import { Http2Upstream, type UpstreamDispatcher } from '../../src/upstream/http2-upstream.js';
import type { Origin } from '../../src/upstream/origins.js';
import { failureOutcome, timedOut } from '../../src/upstream/outcomes.js';

/** What upstream/ reported of an exchange to its pipeline, in order, as a test's record notes it. */
export type Report =
  | { kind: 'failure'; timedOut: boolean }
  | { kind: 'grpcStatus'; httpStatus: number; grpcStatus: string | string[] | undefined }
  | { kind: 'grpcStatusMissing' }
  | { kind: 'trailersOnly'; head: readonly string[] };

/**
 * An exchange as a pipeline's record is one, rendering what upstream/ reports in the plainest way: a
 * failure before the answer as a bare 502 or 504, after it as a cut connection; a trailers-only head as
 * the end of the response. Each report is noted in `reports`.
 */
export class TestExchange extends Exchange {
  readonly reports: Report[] = [];
  /** Whether the client reads gRPC answers (the edge's to say; the test's here). */
  grpcClient = false;
  /** Whether the request opens a WebSocket (the edge's to say; the test's here). */
  opening = false;

  answerFailure(timedOut: boolean): void {
    this.reports.push({ kind: 'failure', timedOut });
    if (this.res.headersSent) {
      this.res.destroy();
      return;
    }
    this.status = timedOut ? 504 : 502;
    this.res.writeHead(this.status).end();
  }

  readsGrpc(): boolean {
    return this.grpcClient;
  }

  isOpening(): boolean {
    return this.opening;
  }

  grpcStatusRead(httpStatus: number, grpcStatus: string | string[] | undefined): void {
    this.reports.push({ kind: 'grpcStatus', httpStatus, grpcStatus });
  }

  grpcStatusMissing(): readonly string[] {
    this.reports.push({ kind: 'grpcStatusMissing' });
    return ['grpc-status', '13'];
  }

  endTrailersOnly(head: readonly string[]): void {
    this.reports.push({ kind: 'trailersOnly', head });
    this.res.statusCode = 200;
    for (let i = 0; i + 1 < head.length; i += 2) this.res.setHeader(head[i]!, head[i + 1]!);
    this.res.end();
  }
}

/** A proxy's share of an exchange, with the failures and the added times it was told. */
export interface TestHost extends DispatchHost {
  readonly failures: Array<{ error: Error; exchange: Exchange }>;
  readonly withoutStatus: Exchange[];
  readonly added: number[];
}

export function testHost(clock: Clock = systemClock, proxyTimeout = 5_000, drainLimit = 8): TestHost {
  const failures: TestHost['failures'] = [];
  const withoutStatus: Exchange[] = [];
  const added: number[] = [];
  return {
    clock,
    timers: clock,
    proxyTimeout,
    drains: new AnswerDrains<Exchange>(drainLimit),
    failures,
    withoutStatus,
    added,
    fail(error, exchange) {
      failures.push({ error, exchange });
      exchange.upstreamOutcome = failureOutcome(error, exchange.upstreamMs !== null);
      exchange.answerFailure(timedOut(error), proxyTimeout, clock);
    },
    answeredWithoutStatus(exchange) {
      withoutStatus.push(exchange);
      exchange.upstreamOutcome = 'invalid';
    },
    addedResponse(ms) {
      added.push(ms);
    },
    // Its exchanges are of the one-URL form: no target's answer is set aside.
    targetAnswered: () => false,
  };
}

/** An origin as origins.ts opens one, without its http-proxy-3 server: the dispatch needs its pool only. */
export function originOf(
  url: string,
  grpc = false,
  clock: Clock = systemClock,
): Origin & { pool: UpstreamDispatcher } {
  const pool = grpc ? new Http2Upstream(url, 5_000, clock) : new Pool(url, { pipelining: 1 });
  const target = new URL(url);
  return {
    pool,
    host: target.host,
    url: target.origin,
    address: target.hostname,
    port: Number(target.port),
    server: null as never,
    openWebSocket: () => undefined,
  };
}

export interface FrontServer {
  url: string;
  /** The exchanges made so far, in the order their requests came. */
  exchanges: TestExchange[];
  close(): Promise<void>;
}

/**
 * A server on 127.0.0.1 that makes each request a TestExchange, lets `prepare` set it up as a pipeline
 * would, and dispatches it to `origin`'s upstream at the request's own path.
 */
export async function startFront(
  origin: Origin,
  host: DispatchHost,
  prepare: (exchange: TestExchange, req: IncomingMessage) => void = () => undefined,
  clock: Clock = systemClock,
): Promise<FrontServer> {
  const exchanges: TestExchange[] = [];
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const exchange = new TestExchange(req, res, clock);
    exchanges.push(exchange);
    exchange.forwarded = true;
    exchange.forwardedAt = clock.monotonic();
    exchange.upstreamTarget = req.url ?? '/';
    prepare(exchange, req);
    dispatch(exchange, origin, host);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exchanges,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await origin.pool.destroy();
    },
  };
}

/** A body watch that keeps what it was shown. */
export class KeepingWatch implements AnswerBodyWatch {
  headers: Record<string, unknown> | null = null;
  readonly chunks: Buffer[] = [];
  head(headers: Record<string, unknown>): void {
    this.headers = headers;
  }
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
  }
}
