import { describe, expect, it } from 'vitest';
import { grpcTimeoutMs } from '../../src/upstream/grpc-timeout.js';

describe('grpc-timeout', () => {
  it.each([
    ['1H', 3_600_000],
    ['2M', 120_000],
    ['3S', 3_000],
    ['250m', 250],
    ['1500u', 1.5],
    ['99999999n', 99.999999],
  ])('reads %s as %f ms', (value, ms) => {
    expect(grpcTimeoutMs(value)).toBeCloseTo(ms, 9);
  });

  it('is no deadline when the call sets none', () => {
    expect(grpcTimeoutMs(undefined)).toBeNull();
  });

  it.each(['', '10', 'S', '123456789S', '1.5S', '-1S', '10s', ' 10S', '10 S', ' 1S', '1S ', '\t1S', '1S\t'])(
    'finds %j malformed',
    (value) => {
      expect(grpcTimeoutMs(value)).toBeNaN();
    },
  );

  it('finds a repeated field malformed', () => {
    expect(grpcTimeoutMs(['1S', '2S'])).toBeNaN();
  });
});
