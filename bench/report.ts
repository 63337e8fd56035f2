import type { AccuracyResult } from './accuracy.js';
import type { RefusalCost } from './refusal-cost.js';

export interface Row {
  name: string;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Processes in the setup's tree (an nginx: its master and its worker); null where /proc cannot tell. */
  processes: number | null;
  /** CPU time of the setup's process tree per request, in microseconds (NaN where /proc cannot tell). */
  cpuUs: number;
  /** cpuUs over bare http-proxy-3's in the same round: the median of the rounds' ratios. */
  cpuVsBare: number;
  /** Redis script calls (EVAL, EVALSHA, FCALL) per request; null for a setup without Redis. */
  redisCalls: number | null;
  /** CPU time of the bench's redis-server per request, in microseconds; null for a setup without Redis. */
  redisCpuUs: number | null;
}

const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');
const times = (value: number) => (Number.isFinite(value) ? `${value.toFixed(2)}×` : 'n/a');
const signed = (value: number, digits: number) =>
  Number.isFinite(value) ? `${value >= 0 ? '+' : '−'}${Math.abs(value).toFixed(digits)}` : 'n/a';
const orDash = (value: number | null, digits: number) => (value === null ? '—' : fixed(value, digits));

/** The Markdown table: medians of the rounds, and ratios to bare http-proxy-3 and to nginx. */
export function markdownTable(rows: readonly Row[], bare: string, nginx: string | null): string {
  const base = rows.find((row) => row.name === bare);
  const reference = nginx ? rows.find((row) => row.name === nginx) : undefined;
  const lines = [
    `| Setup | req/s | p50 ms | p99 ms | processes | CPU µs/req | CPU vs bare | Redis script calls/req | Redis CPU µs/req | req/s vs bare http-proxy-3 |${reference ? ' req/s vs nginx |' : ''}`,
    `|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|${reference ? '---:|' : ''}`,
  ];
  for (const row of rows) {
    const vsBase = base ? `${fixed((row.rps / base.rps) * 100, 0)}%` : '';
    const vsNginx = reference ? ` ${fixed((row.rps / reference.rps) * 100, 0)}% |` : '';
    lines.push(
      `| ${row.name} | ${fixed(row.rps, 0)} | ${fixed(row.p50Ms, 2)} | ${fixed(row.p99Ms, 2)} | ${row.processes ?? 'n/a'} | ${fixed(row.cpuUs, 0)} | ${times(row.cpuVsBare)} | ${orDash(row.redisCalls, 3)} | ${orDash(row.redisCpuUs, 1)} | ${vsBase} |${vsNginx}`,
    );
  }
  return lines.join('\n');
}

export interface LatencyRow {
  name: string;
  /** From each request's scheduled send time to the end of its answer; medians of the rounds. */
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  /** p99 minus bare http-proxy-3's p99 of the same round: the median of the rounds' differences. */
  addedP99Ms: number;
  /** CPU time of the setup's process tree per answered request at this rate. */
  cpuUs: number;
  cpuVsBare: number;
  /** The generator's own lateness (scheduled time to write), p99; part of the latency. */
  sendLagP99Ms: number;
  /** Over all rounds: requests that waited for a free connection of a full pool. */
  late: number;
  /** Over all rounds: requests whose connection failed, or still unanswered at the end. */
  failed: number;
}

/** The open-loop table: latency at a fixed request rate, and CPU per request at that rate. */
export function latencyTable(rows: readonly LatencyRow[], rate: number): string {
  const lines = [
    `| At ${rate.toLocaleString('en-US')} req/s, open loop | p50 ms | p99 ms | p99.9 ms | added p99 over bare ms | CPU µs/req | CPU vs bare | generator lag p99 ms | late / failed |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.name} | ${fixed(row.p50Ms, 2)} | ${fixed(row.p99Ms, 2)} | ${fixed(row.p999Ms, 2)} | ${signed(row.addedP99Ms, 2)} | ${fixed(row.cpuUs, 0)} | ${times(row.cpuVsBare)} | ${fixed(row.sendLagP99Ms, 2)} | ${row.late} / ${row.failed} |`,
    );
  }
  return lines.join('\n');
}

export interface AblationRow {
  layers: string;
  rps: number;
  cpuUs: number;
  cpuVsBare: number;
  /** CPU µs/req over the row above's in the same round: the median of the rounds' differences. */
  addedUs: number | null;
}

/** The ablation table: quotagate (memory store) one layer at a time, CPU per request against bare. */
export function ablationTable(rows: readonly AblationRow[]): string {
  const lines = [
    '| quotagate, memory store, layer by layer | CPU µs/req | CPU vs bare | µs/req added by the layer | req/s |',
    '|---|---:|---:|---:|---:|',
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.layers} | ${fixed(row.cpuUs, 0)} | ${times(row.cpuVsBare)} | ${row.addedUs === null ? '—' : signed(row.addedUs, 0)} | ${fixed(row.rps, 0)} |`,
    );
  }
  return lines.join('\n');
}

export interface SideBySideRow {
  name: string;
  cpuUs: number;
  /** CPU µs/req over bare http-proxy-3's in the same side-by-side round: the median of the rounds. */
  cpuVsBare: number;
  lowest: number;
  highest: number;
}

/** The side-by-side table: every setup loaded at once, CPU per request against bare in each round. */
export function sideBySideTable(rows: readonly SideBySideRow[]): string {
  const lines = [
    '| Side by side (loaded at the same time) | CPU µs/req | CPU vs bare | lowest – highest round |',
    '|---|---:|---:|---:|',
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.name} | ${fixed(row.cpuUs, 0)} | ${times(row.cpuVsBare)} | ${times(row.lowest)} – ${times(row.highest)} |`,
    );
  }
  return lines.join('\n');
}

/**
 * The limit-20-per-minute case: what admitted and refused requests cost in Redis script calls (all of
 * them), and in counter trips by the gateways' own count (heartbeats apart).
 */
export function refusalTable(cases: readonly RefusalCost[]): string {
  const per = (calls: number, requests: number) => (requests ? (calls / requests).toFixed(2) : 'n/a');
  const lines = [
    `| Limit ${cases[0]?.limit ?? ''} per minute, Redis store | requests | admitted | refused | script calls per admitted | per refused | counter trips per admitted | per refused |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const c of cases) {
    lines.push(
      `| ${c.gateways === 1 ? '1 gateway' : `${c.gateways} gateways in turn`} | ${c.requests} | ${c.admitted} | ${c.refused} | ${per(c.callsAdmitted, c.admitted)} | ${per(c.callsRefused, c.refused)} | ${per(c.tripsAdmitted, c.admitted)} | ${per(c.tripsRefused, c.refused)} |`,
    );
  }
  return lines.join('\n');
}

/** The accuracy bench: the most admitted in any interval of one window, at the upstream and at the client. */
export function accuracyTable(results: readonly AccuracyResult[]): string {
  const lines = [
    '| Accuracy, 3 gateways, boundary bursts | limit | most in one window at the upstream | target | at the client | attempts | admitted at the upstream | switches to onError |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.name} | ${r.limit} per ${r.windowSeconds} s | ${r.upstream.most} | ≤ ${r.target} | ${r.client.most} | ${r.attempts} | ${r.upstream.admitted} | ${r.fallbacks} |`,
    );
  }
  return lines.join('\n');
}

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A horizontal bar chart of req/s (SVG, no dependencies), with p99 in each label. */
export function svgChart(rows: readonly Row[], title: string): string {
  const barHeight = 26;
  const gap = 10;
  const labelWidth = 330;
  const chartWidth = 460;
  const top = 44;
  const height = top + rows.length * (barHeight + gap) + 20;
  const max = Math.max(...rows.map((row) => row.rps), 1);
  const bars = rows.map((row, i) => {
    const y = top + i * (barHeight + gap);
    const width = Math.max(1, (row.rps / max) * chartWidth);
    const quotagate = row.name.startsWith('quotagate');
    return [
      `<text x="${labelWidth - 10}" y="${y + 18}" text-anchor="end">${escape(row.name)}</text>`,
      `<rect x="${labelWidth}" y="${y}" width="${width.toFixed(1)}" height="${barHeight}" fill="${quotagate ? '#2f6fdf' : '#9aa5b1'}"/>`,
      `<text x="${labelWidth + width + 6}" y="${y + 18}">${Math.round(row.rps)} req/s · p99 ${fixed(row.p99Ms, 2)} ms</text>`,
    ].join('');
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + chartWidth + 200}" height="${height}" font-family="sans-serif" font-size="13">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="16" y="24" font-size="15" font-weight="bold">${escape(title)}</text>`,
    ...bars,
    '</svg>',
    '',
  ].join('\n');
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
