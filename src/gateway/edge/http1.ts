import type { CompiledApi } from '../../catalog/router.js';
import { grpcTimeoutMs } from '../../upstream/grpc-timeout.js';
import type { DataPlaneErrorCode } from '../answers/errors.js';
import { isGrpcCall } from '../answers/grpc.js';
import type { ExchangeRecord } from '../record.js';
import { asksForWebSocket, upgradeProblem } from './websocket-handshake.js';

/** A refusal the edge finds in how a request came: the code, fields that say more, and a detail. */
export interface EdgeRefusal {
  readonly code: DataPlaneErrorCode;
  readonly fields: readonly string[];
  readonly detail?: string;
}

/** RFC 9110 §15.6.6: gRPC runs over HTTP/2 alone, and the major version of any other is refused. */
const grpcOverHttp2Only: EdgeRefusal = {
  code: 'http_version_not_supported',
  fields: [],
  detail: 'a gRPC API is called over HTTP/2 (h2c or TLS with ALPN h2)',
};
const malformedGrpcTimeout: EdgeRefusal = {
  code: 'bad_request',
  fields: [],
  detail: 'grpc-timeout must be 1 to 8 digits and a unit (H, M, S, m, u or n)',
};
const noWebSockets: EdgeRefusal = {
  code: 'bad_request',
  fields: [],
  detail: 'this API takes no WebSocket upgrades',
};

/**
 * Turns how a request came into the record's facts, once, for every listener (an HTTP/2 stream enters
 * through the same `request` event): its version, and its form. The steps read these, never the request.
 * @param head for a request that came through the 'upgrade' event, the bytes that followed its head
 */
export function takeRequest(record: ExchangeRecord, head: Buffer | null): void {
  const { req } = record;
  record.version =
    req.httpVersionMajor === 2 ? 'HTTP/2' : req.httpVersionMinor === 0 ? 'HTTP/1.0' : 'HTTP/1.1';
  if (head !== null) {
    record.upgradeHead = head;
    record.form = asksForWebSocket(req) ? 'opening' : 'upgrade';
  } else if (isGrpcCall(req)) record.form = 'call';
}

/** Why a request that came with `Connection: upgrade` cannot go on (400), or null (`upgradeProblem`). */
export function upgradeRefusal(record: ExchangeRecord): EdgeRefusal | null {
  if (record.form !== 'opening' && record.form !== 'upgrade') return null;
  const problem = upgradeProblem(record.req, record.form === 'opening');
  return problem && { code: 'bad_request', fields: problem.fields, detail: problem.detail };
}

/** Refuses a call of a gRPC API that did not come over HTTP/2, before anything goes upstream. */
export function versionRefusal(record: ExchangeRecord, api: CompiledApi): EdgeRefusal | null {
  return api.config.protocol === 'grpc' && record.version !== 'HTTP/2' ? grpcOverHttp2Only : null;
}

/**
 * What the routed API's protocol asks of the request: a gRPC call's `grpc-timeout` is read (its deadline,
 * when shorter than `proxyTimeout`, set on the record), and a WebSocket opening goes only to an API that
 * takes them. The refusal, or null.
 */
export function callRefusal(
  record: ExchangeRecord,
  api: CompiledApi,
  proxyTimeout: number,
): EdgeRefusal | null {
  if (api.config.protocol === 'grpc') {
    const deadlineMs = grpcTimeoutMs(record.req.headers['grpc-timeout']);
    if (Number.isNaN(deadlineMs)) return malformedGrpcTimeout;
    if (deadlineMs !== null && deadlineMs < proxyTimeout) record.deadlineMs = deadlineMs;
  }
  if (record.form === 'opening' && !api.config.websocket) return noWebSockets;
  return null;
}
