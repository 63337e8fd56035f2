/** Milliseconds in one of each `grpc-timeout` unit (gRPC over HTTP/2, "Requests": TimeoutUnit). */
const unitMs: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 0.001,
  n: 0.000_001,
};

/** At most 8 digits, then the unit (gRPC over HTTP/2, "Requests": TimeoutValue). */
const timeoutSyntax = /^(\d{1,8})([HMSmun])$/;

/**
 * The deadline a gRPC call's `grpc-timeout` sets, in milliseconds: null without one, NaN for a value
 * that is not gRPC's `1*8DIGIT unit` (the caller refuses the call, as grpc-go does).
 */
export function grpcTimeoutMs(value: string | string[] | undefined): number | null {
  if (value === undefined) return null;
  const match = typeof value === 'string' ? timeoutSyntax.exec(value) : null;
  return match ? Number(match[1]) * unitMs[match[2]!]! : Number.NaN;
}
