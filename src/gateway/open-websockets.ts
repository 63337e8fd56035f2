import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthResult, Authenticator, Principal } from '../auth/authenticator.js';
import type { Clock } from '../kit/clock.js';
import type { CounterAddition } from '../limiter/counter-store.js';
import type { Limiter, LimiterVerdict } from '../limiter/limiter.js';
import type { Logger } from '../observe/log.js';
import type { ApplicableRestriction } from '../quota/quota-index.js';
import type { WebSocketLink } from './proxy/websocket-link.js';

/** Milliseconds between two looks at every open WebSocket: its bytes charged, its credentials checked. */
export const webSocketTickMs = 1_000;

/** How a request's quota check ended, for the access log; `shadow_refused` when admitted against a shadow restriction. */
export type QuotaOutcome = 'allowed' | 'rejected' | 'unavailable' | 'shadow_refused';

/** What the tick reads and writes of an open WebSocket: the gateway's record of its upgrade request. */
export interface OpenWebSocket {
  readonly id: string;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The authenticator of the data plane it opened on (a reload does not change it). */
  readonly plane: { readonly authenticator: Authenticator };
  readonly principal: Principal | null;
  /** Null until the upstream answered 101. */
  readonly webSocket: WebSocketLink | null;
  /** The throttlemb restrictions that admitted it, shadow ones among them. */
  readonly byteCounters: readonly ApplicableRestriction[];
  readonly bytesIn: number;
  readonly bytesOut: number;
  /** Bytes charged so far: the tick charges the rest, and so does the account at the close. */
  chargedBytes: number;
  quota: QuotaOutcome | null;
  addRefusal(restriction: ApplicableRestriction): void;
}

export interface OpenWebSocketsParts {
  timers: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
  limiter: Limiter;
  logger: Logger;
  /** A number that changes whenever keys or applications do: credentials are checked again after it. */
  credentialsGeneration?: () => number;
}

const isPromise = <T>(value: T | Promise<T>): value is Promise<T> => value instanceof Promise;

/** `amount` added to the counter of each of `restrictions`. */
export const additionsOf = (
  restrictions: readonly ApplicableRestriction[],
  amount: number,
): CounterAddition[] =>
  restrictions.map(({ counterKey, windowMs }) => ({ key: counterKey, windowMs, amount }));

/**
 * The WebSockets open on this gateway (their upgrade requests, from the moment they are forwarded until
 * they close), and the tick that looks at each of them once a second while any is open: a long-lived
 * connection is charged as it runs, not only when it ends, and ends when its bytes find no room or its
 * credentials no longer hold.
 */
export class OpenWebSockets {
  private readonly open = new Set<OpenWebSocket>();
  private timer: unknown = null;
  /** `credentialsGeneration` when the open WebSockets' credentials were last known good. */
  private checkedGeneration: number;

  constructor(private readonly parts: OpenWebSocketsParts) {
    this.checkedGeneration = parts.credentialsGeneration?.() ?? 0;
  }

  add(socket: OpenWebSocket): void {
    this.open.add(socket);
    this.timer ??= this.parts.timers.setTimeout(this.tick, webSocketTickMs);
  }

  delete(socket: OpenWebSocket): void {
    if (!this.open.delete(socket) || this.open.size > 0 || this.timer === null) return;
    this.parts.timers.clearTimeout(this.timer);
    this.timer = null;
  }

  /**
   * Ends every open WebSocket (close code 1001, going away) and cuts off the upgrade requests still
   * waiting for the upstream: the end of a shutdown's grace period.
   */
  endAll(): void {
    for (const socket of this.open) {
      if (socket.webSocket) socket.webSocket.end(1001, 'gateway shutting down', 'shutdown');
      else socket.req.socket.destroy();
    }
  }

  private readonly tick = (): void => {
    this.timer = this.parts.timers.setTimeout(this.tick, webSocketTickMs);
    const generation = this.parts.credentialsGeneration?.() ?? 0;
    const recheck = generation !== this.checkedGeneration;
    this.checkedGeneration = generation;
    for (const socket of this.open) {
      if (socket.webSocket === null || socket.webSocket.endedBy !== null) continue;
      this.charge(socket);
      if (recheck && socket.principal) this.recheckCredentials(socket);
    }
  };

  /**
   * Charges an open WebSocket's byte restrictions what it moved since the last tick. When an enforced
   * one has no room for it, the bytes are counted all the same and the connection ends (1008, policy
   * violation: RFC 6455 §7.4.1).
   */
  private charge(socket: OpenWebSocket): void {
    const moved = socket.bytesIn + socket.bytesOut - socket.chargedBytes;
    if (moved === 0 || socket.byteCounters.length === 0) return;
    socket.chargedBytes += moved;
    const enforced = socket.byteCounters.filter((restriction) => !restriction.shadow);
    const shadows = socket.byteCounters.filter((restriction) => restriction.shadow);
    if (shadows.length > 0) this.count(socket, additionsOf(shadows, moved));
    if (enforced.length === 0) return;
    const specs = enforced.map(({ counterKey, limit, windowMs }) => ({
      key: counterKey,
      limit,
      windowMs,
      cost: moved,
      need: moved,
    }));
    const settle = (verdict: LimiterVerdict): void => {
      if (verdict === 'unavailable' || verdict.allowed || verdict.outOfRoom) return;
      this.count(socket, additionsOf(enforced, moved));
      socket.quota = 'rejected';
      enforced.forEach((restriction, i) => {
        if ((verdict.states[i]?.used ?? 0) + moved > restriction.limit) socket.addRefusal(restriction);
      });
      socket.webSocket?.end(1008, 'byte quota exhausted', 'quota');
    };
    const verdict = this.parts.limiter.consume(specs);
    if (isPromise(verdict)) verdict.then(settle, (error: unknown) => this.failed(socket, error));
    else settle(verdict);
  }

  /** Adds bytes the connection moved to counters: a failure is logged. */
  private count(socket: OpenWebSocket, additions: CounterAddition[]): void {
    this.parts.limiter.add(additions)?.catch((error: unknown) => this.failed(socket, error));
  }

  private failed(socket: OpenWebSocket, error: unknown): void {
    this.parts.logger.error({ err: error, requestId: socket.id }, 'charging WebSocket bytes failed');
  }

  /** Authenticates an open WebSocket's request again: a key revoked or an application deleted ends it. */
  private recheckCredentials(socket: OpenWebSocket): void {
    const settle = (auth: AuthResult): void => {
      const revoked = auth.ok
        ? auth.principal?.application !== socket.principal?.application
        : auth.reject === 'unauthorized';
      if (revoked) socket.webSocket?.end(1008, 'credentials revoked', 'revoked');
    };
    const auth = socket.plane.authenticator.authenticate(socket.req, socket.res);
    if (!isPromise(auth)) return settle(auth);
    auth.then(settle, (error: unknown) => {
      this.parts.logger.warn({ err: error, requestId: socket.id }, 'checking WebSocket credentials failed');
    });
  }
}
