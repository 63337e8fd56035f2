import { describe, expect, it } from 'vitest';
import type { IncomingMessage } from 'node:http';
import {
  clientGrpcStatusOf,
  grpcMessage,
  grpcStatusOf,
  isGrpcCall,
  isGrpcRequest,
  readGrpcStatus,
} from '../../../src/gateway/answers/grpc.js';
import { dataPlaneErrors } from '../../../src/gateway/answers/errors.js';

describe('which requests are gRPC calls', () => {
  it.each(['application/grpc', 'application/grpc+proto', 'application/GRPC+json', 'application/grpc; a=b'])(
    'takes %s for a gRPC call',
    (type) => {
      expect(isGrpcRequest({ 'content-type': type })).toBe(true);
    },
  );

  it.each(['application/grpc-web', 'application/grpc-web+proto', 'application/grpcx', 'application/json'])(
    'does not take %s for one (gRPC-Web carries its trailers in the body)',
    (type) => {
      expect(isGrpcRequest({ 'content-type': type })).toBe(false);
    },
  );

  it('does not take a request without a content type for one', () => {
    expect(isGrpcRequest({})).toBe(false);
  });

  it('takes a gRPC content type for a call only over HTTP/2', () => {
    const headers = { 'content-type': 'application/grpc' };
    expect(isGrpcCall({ httpVersionMajor: 2, headers } as IncomingMessage)).toBe(true);
    expect(isGrpcCall({ httpVersionMajor: 1, headers } as IncomingMessage)).toBe(false);
  });
});

describe('the gRPC status of each error of the gateway', () => {
  const expected: Record<keyof typeof dataPlaneErrors, number> = {
    bad_request: 13,
    unauthorized: 16,
    not_found: 12,
    method_not_allowed: 12,
    payload_too_large: 8,
    quota_exceeded: 8,
    internal_error: 13,
    bad_gateway: 14,
    service_unavailable: 14,
    upstream_unavailable: 14,
    gateway_timeout: 4,
    // Only ever answered over HTTP/1.1, where no answer is in gRPC's form.
    http_version_not_supported: 2,
  };

  it.each(Object.entries(dataPlaneErrors))('gives %s (HTTP %i) its gRPC status', (code, { status }) => {
    expect(grpcStatusOf(status)).toBe(expected[code as keyof typeof dataPlaneErrors]);
  });

  it('gives 403 PERMISSION_DENIED, and a status it has no word for UNKNOWN', () => {
    expect(grpcStatusOf(403)).toBe(7);
    expect(grpcStatusOf(418)).toBe(2);
  });
});

describe('grpc-message', () => {
  it('keeps printable ASCII as it is', () => {
    expect(grpcMessage('Too Many Requests')).toBe('Too Many Requests');
  });

  it('percent-encodes %, control characters and the UTF-8 bytes of other characters', () => {
    expect(grpcMessage('100% über\n')).toBe('100%25 %C3%BCber%0A');
  });
});

describe('the gRPC status a client reads from an upstream', () => {
  it.each([
    ['0', 0],
    ['7', 7],
    ['16', 16],
    ['17', 2],
    ['-1', 2],
    ['abc', 2],
    ['', 2],
  ])('reads grpc-status %j as %i (any number but 0 to 16 is UNKNOWN)', (value, code) => {
    expect(readGrpcStatus(value)).toBe(code);
  });

  it('reads an answer of another HTTP status without grpc-status as gRPC clients map it', () => {
    expect([400, 401, 403, 404, 429, 502, 503, 504, 500].map(clientGrpcStatusOf)).toEqual([
      13, 16, 7, 12, 14, 14, 14, 14, 2,
    ]);
  });
});
