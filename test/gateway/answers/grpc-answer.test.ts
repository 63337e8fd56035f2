import { describe, expect, it } from 'vitest';
import { grpcMessage, grpcStatusOf, isGrpcRequest } from '../../../src/gateway/answers/grpc-answer.js';
import { dataPlaneErrors } from '../../../src/gateway/errors.js';

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
    gateway_timeout: 4,
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
