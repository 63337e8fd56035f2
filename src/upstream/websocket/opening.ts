import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Clock } from '../../kit/clock.js';
import type { Logger } from '../../observe/log.js';
import { exchangeOf, type Exchange } from '../exchange.js';
import { appendEndToEndResponseFields } from '../fields/hop-by-hop.js';
import { UpgradeTimeout } from '../outcomes.js';
import { WebSocketLink, type WebSocketLimits } from './link.js';
import type { WebSocketSteps } from './relay.js';

/** What a WebSocket opening needs of the proxy. */
export interface OpeningHost {
  readonly proxyTimeout: number;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How each open WebSocket is kept in check. */
  readonly webSocketLimits: WebSocketLimits;
  /** The exchange failed before the upstream answered. */
  fail(error: Error, exchange: Exchange): void;
}

/**
 * The upstream request's fields of a WebSocket opening: the exchange's `upstreamFields`, the upstream's
 * Host and the upgrade fields. The client's fields stay the request's, for the credentials to be
 * checked again while the WebSocket is open.
 *
 * RFC 7692: a compressed message crosses in fewer bytes than the upstream inflates. A byte restriction
 * counts what it protects, so when one counts the exchange the upstream is offered no extension: the
 * frames then carry their payload as it is (docs/quotas.md, "Counting").
 */
export function openingHeaders(exchange: Exchange, host: string): IncomingHttpHeaders {
  const fields = exchange.upstreamFields;
  const offer = exchange.countsBytes ? fields.indexOf('sec-websocket-extensions') : -1;
  if (offer !== -1) fields.splice(offer, 2);
  return headersOf(fields, [
    'host',
    host,
    'connection',
    'Upgrade',
    'upgrade',
    'websocket',
  ]) as IncomingHttpHeaders;
}

/**
 * The steps of a WebSocket opening, as http-proxy-3's `ws()` runs it (`followWebSocketOpenings`): the
 * upstream request is watched, the 101's fields made the gateway's before they are written, and the
 * link set on the sockets once they are open.
 */
export function webSocketSteps(host: OpeningHost): WebSocketSteps {
  return {
    requested: (proxyReq, req) => {
      const exchange = exchangeOf(req)!;
      proxyReq.setTimeout(host.proxyTimeout, () => proxyReq.destroy(new UpgradeTimeout('upgrade timed out')));
      req.socket.once('close', () => {
        if (exchange.webSocket === null) proxyReq.destroy();
      });
      proxyReq.on('response', (proxyRes: IncomingMessage) => {
        // The upstream refused the upgrade: its answer is relayed, and the connection closes after it.
        answered(host, exchange, proxyRes, ['connection', 'close']);
        proxyRes.on('data', (chunk: Buffer) => {
          exchange.bytesOut += chunk.length;
        });
      });
    },
    switching: (req, proxyRes, upstreamSocket) => {
      answered(host, exchangeOf(req)!, proxyRes, ['connection', 'Upgrade', 'upgrade', 'websocket']);
      if (req.socket.destroyed) upstreamSocket.destroy();
    },
    opened: (req, client, upstreamSocket) => {
      const exchange = exchangeOf(req)!;
      exchange.webSocket = new WebSocketLink(exchange, client, upstreamSocket, host.webSocketLimits);
    },
    failed: (error, req) => openingFailed(host, error, req),
  };
}

/** The upstream's answer to an upgrade request, its fields made the end-to-end ones and the gateway's. */
function answered(
  host: OpeningHost,
  exchange: Exchange,
  proxyRes: IncomingMessage,
  connection: readonly string[],
): void {
  exchange.upstreamMs = host.clock.monotonic() - exchange.forwardedAt;
  exchange.status = proxyRes.statusCode ?? 0;
  exchange.responseHeaders = proxyRes.headers;
  // The opening's try is over with the upstream's answer; the WebSocket it opens is the server span's.
  exchange.tryEnded('completed', exchange.status);
  const fields = appendEndToEndResponseFields(proxyRes.headers, [...exchange.fields, ...connection], null);
  proxyRes.headers = headersOf(fields, []) as IncomingHttpHeaders;
}

/** A failed upgrade exchange, or an upstream socket that failed once open. */
function openingFailed(host: OpeningHost, error: Error, req: IncomingMessage): void {
  const exchange = exchangeOf(req)!;
  if (exchange.status === 0) {
    exchange.tryEnded(error, 0);
    host.fail(error, exchange);
    return;
  }
  // The gateway is ending the WebSocket (an upstream it cut off may fail as it goes): the close frame
  // it sent the client goes before the connection closes.
  if (exchange.webSocket !== null && exchange.webSocket.endedBy !== null) return;
  // After the upstream's answer began: the connection breaks, as it would have without the gateway.
  if (exchange.upstreamOutcome === 'completed') {
    exchange.upstreamOutcome = 'reset';
    host.logger.warn(
      { err: { code: (error as NodeJS.ErrnoException).code, message: error.message }, outcome: 'reset' },
      'upstream WebSocket failed',
    );
  }
  req.socket.destroy();
}

/** `fields` (name, value pairs) and `more` as the header object http-proxy-3 writes; repeated names as lists. */
function headersOf(fields: ReadonlyArray<string | string[]>, more: readonly string[]): OutgoingHttpHeaders {
  const headers: Record<string, string | string[]> = {};
  for (const list of [fields, more]) {
    for (let i = 0; i < list.length; i += 2) {
      const name = list[i] as string;
      const value = list[i + 1]!;
      const existing = headers[name];
      headers[name] = existing === undefined ? value : [existing, value].flat();
    }
  }
  return headers;
}
