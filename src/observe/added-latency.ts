import * as hdr from 'hdr-histogram-js';

/** Time the gateway adds to an exchange, in milliseconds, handed to whoever records it. */
export interface AddedLatencySink {
  /** From the request's arrival until the upstream request was handed to Node's HTTP client. */
  request(ms: number): void;
  /** From the upstream response's head until the client response's head was handed to Node. */
  response(ms: number): void;
}

/** The two parts of an exchange the gateway adds time to. */
export const latencyParts = ['request', 'response'] as const;
export type LatencyPart = (typeof latencyParts)[number];

/** Microseconds the histograms track: 1 µs to a minute, at three significant digits. */
const highestMicroseconds = 60_000_000;

const histogram = (): hdr.Histogram =>
  hdr.build({
    bitBucketSize: 32,
    lowestDiscernibleValue: 1,
    highestTrackableValue: highestMicroseconds,
    numberOfSignificantValueDigits: 3,
  });

/** What one part's histogram says, in milliseconds, with the histogram itself for a reader to merge. */
export interface LatencySummary {
  count: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
  /** The HdrHistogram of microseconds, compressed and in base64 (HdrHistogram's own encoding). */
  histogram: string;
}

export type LatencyReport = Record<LatencyPart, LatencySummary>;
/** Each part's histogram, encoded: what a worker hands its primary. */
export type EncodedLatency = Record<LatencyPart, string>;

const milliseconds = (microseconds: number) => microseconds / 1000;

/**
 * The time the gateway adds to every exchange, as it measures it itself: from the request's arrival to
 * the upstream request handed to Node's HTTP client, and from the upstream response's head to the client
 * response's head handed to Node. Each part goes into an HdrHistogram in memory (about 65 ns a value),
 * read when asked; no request writes anything anywhere.
 */
export class AddedLatency implements AddedLatencySink {
  private readonly histograms: Record<LatencyPart, hdr.Histogram> = {
    request: histogram(),
    response: histogram(),
  };

  request(ms: number): void {
    this.record(this.histograms.request, ms);
  }

  response(ms: number): void {
    this.record(this.histograms.response, ms);
  }

  encoded(): EncodedLatency {
    return {
      request: hdr.encodeIntoCompressedBase64(this.histograms.request),
      response: hdr.encodeIntoCompressedBase64(this.histograms.response),
    };
  }

  /** Values at or below each bound (seconds), cumulative, and the count and sum: a Prometheus histogram. */
  buckets(
    part: LatencyPart,
    boundsSeconds: readonly number[],
  ): { counts: number[]; count: number; sum: number } {
    const of = this.histograms[part];
    const counts = boundsSeconds.map((bound) => countAtOrBelow(of, Math.round(bound * 1_000_000)));
    return { counts, count: of.totalCount, sum: (of.mean * of.totalCount) / 1_000_000 };
  }

  private record(into: hdr.Histogram, ms: number): void {
    into.recordValue(Math.min(highestMicroseconds, Math.max(0, Math.round(ms * 1000))));
  }
}

/** Values recorded at or below `value` (microseconds), as the histogram's precision tells them apart. */
function countAtOrBelow(of: hdr.Histogram, value: number): number {
  const js = of as unknown as {
    countsArrayIndex(value: number): number;
    getCountAtIndex(index: number): number;
  };
  const last = js.countsArrayIndex(Math.min(value, highestMicroseconds));
  let count = 0;
  for (let index = 0; index <= last; index += 1) count += js.getCountAtIndex(index);
  return count;
}

function summarize(of: hdr.Histogram): LatencySummary {
  return {
    count: of.totalCount,
    p50Ms: milliseconds(of.getValueAtPercentile(50)),
    p99Ms: milliseconds(of.getValueAtPercentile(99)),
    p999Ms: milliseconds(of.getValueAtPercentile(99.9)),
    maxMs: milliseconds(of.maxValue),
    histogram: hdr.encodeIntoCompressedBase64(of),
  };
}

/** One report of several gateways' (or workers') encoded histograms: their values together. */
export function latencyReport(encoded: readonly EncodedLatency[]): LatencyReport {
  const merged = (part: LatencyPart) => {
    const all = histogram();
    for (const one of encoded) all.add(hdr.decodeFromCompressedBase64(one[part]));
    return summarize(all);
  };
  return { request: merged('request'), response: merged('response') };
}

/**
 * What was recorded between two reports of the same gateways (`later` minus `earlier`), each part's
 * percentiles from the difference: the added latency of one stretch of traffic.
 */
export function latencyBetween(earlier: LatencyReport, later: LatencyReport): LatencyReport {
  const difference = (part: LatencyPart) => {
    const between = histogram();
    between.add(hdr.decodeFromCompressedBase64(later[part].histogram));
    between.subtract(hdr.decodeFromCompressedBase64(earlier[part].histogram));
    return summarize(between);
  };
  return { request: difference('request'), response: difference('response') };
}
