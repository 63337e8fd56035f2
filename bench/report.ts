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

/** A row of the headline: one setup loaded side by side with its reference. */
export interface HeadlineRow {
  name: string;
  /** Median CPU µs per request over the side-by-side rounds. */
  cpuUs: number;
  /** CPU µs/req over its reference's in the same round: median, lowest and highest round. */
  ratio: number;
  /** What it is compared with: the undici floor, or the bare peer of its protocol; its own name if none. */
  reference: string;
  lowest: number;
  highest: number;
  /** CPU µs/req over bare http-proxy-3's in the same round (median); null for a row per message or event. */
  vsBare: number | null;
  /** For a layer of quotagate: what it adds to the layer below, median of the rounds' differences. */
  addedUs: number | null;
  /** The figure issue 35 asks of this row (CPU vs its reference at most), or null. */
  target: number | null;
}

/**
 * The run's noise: how far from 1 the median ratio of two identical setups may lie in the same rounds,
 * the farther end of its 95% confidence interval (a median that happens to land on 1.00 says nothing of
 * how widely the rounds spread).
 */
export function noiseOf(control: { medianLow: number; medianHigh: number }): number {
  return Math.max(Math.abs(control.medianLow - 1), Math.abs(control.medianHigh - 1));
}

/**
 * The side-by-side table: every setup loaded at once, CPU per request against its reference in each
 * round; `noise` (see noiseOf) heads the ratio column, so that a reader weighs every ratio against it.
 */
export function headlineTable(rows: readonly HeadlineRow[], noise: number): string {
  const lines = [
    `| Setup (all loaded at the same time) | CPU µs/req (or /message, /event) | CPU vs reference (noise ±${fixed(noise * 100, 0)}%) | reference | lowest – highest round | CPU vs bare http-proxy-3 | µs/req the layer adds | target | |`,
    '|---|---:|---:|---|---:|---:|---:|---:|---|',
  ];
  for (const row of rows) {
    const itself = row.reference === row.name;
    const verdict = row.target === null ? '' : row.ratio <= row.target ? 'met' : '**not met**';
    lines.push(
      `| ${row.name} | ${fixed(row.cpuUs, 0)} | ${times(row.ratio)} | ${itself ? '' : row.reference} | ${itself ? '' : `${times(row.lowest)} – ${times(row.highest)}`} | ${row.vsBare === null ? '' : times(row.vsBare)} | ${row.addedUs === null ? '' : signed(row.addedUs, 0)} | ${row.target === null ? '' : `≤ ${times(row.target)}`} | ${verdict} |`,
    );
  }
  return lines.join('\n');
}

/** What the gateway says it added itself, over the open-loop rounds at a fixed rate (milliseconds). */
export interface GatewayLatencyRow {
  name: string;
  requestP50Ms: number;
  requestP99Ms: number;
  requestP999Ms: number;
  responseP50Ms: number;
  responseP99Ms: number;
  responseP999Ms: number;
  /** Exchanges it measured over the rounds. */
  count: number;
}

export function gatewayLatencyTable(rows: readonly GatewayLatencyRow[], rate: number): string {
  const lines = [
    `| Added by the gateway, as it measures itself (${rate.toLocaleString('en-US')} req/s) | request p50 ms | p99 | p99.9 | response p50 ms | p99 | p99.9 | exchanges |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.name} | ${fixed(row.requestP50Ms, 3)} | ${fixed(row.requestP99Ms, 3)} | ${fixed(row.requestP999Ms, 3)} | ${fixed(row.responseP50Ms, 3)} | ${fixed(row.responseP99Ms, 3)} | ${fixed(row.responseP999Ms, 3)} | ${row.count} |`,
    );
  }
  return lines.join('\n');
}

/** One setup of the workers comparison: the same gateway with one process, or one per core. */
export interface WorkersRow {
  name: string;
  rps: number;
  p99Ms: number;
  cpuUs: number;
  /** Cores the whole process tree kept busy: CPU seconds over wall seconds. */
  cores: number;
}

export function workersTable(rows: readonly WorkersRow[], connections: number): string {
  const lines = [
    `| As shipped, memory store, ${connections} connections, whole machine | req/s | p99 ms | CPU µs/req | cores busy |`,
    '|---|---:|---:|---:|---:|',
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.name} | ${fixed(row.rps, 0)} | ${fixed(row.p99Ms, 2)} | ${fixed(row.cpuUs, 0)} | ${fixed(row.cores, 2)} |`,
    );
  }
  return lines.join('\n');
}

/** A figure issue 21 asks for, what the run measured, and whether it holds. */
export interface Figure {
  what: string;
  measured: string;
  target: string;
  /** Null when this run did not measure it (a part skipped). */
  met: boolean | null;
}

export function figuresTable(figures: readonly Figure[]): string {
  return [
    '| Figure | measured | target | |',
    '|---|---:|---:|---|',
    ...figures.map(
      (f) =>
        `| ${f.what} | ${f.measured} | ${f.target} | ${f.met === null ? 'not measured' : f.met ? 'met' : '**not met**'} |`,
    ),
  ].join('\n');
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

/**
 * The headline as a chart (SVG, no dependencies): each setup's CPU per request against `reference` as a
 * bar at the median of the rounds, a whisker from the lowest to the highest round, a
 * line at 1.00×, and the target of each row as a tick.
 */
export function headlineChart(rows: readonly HeadlineRow[], reference: string, title: string): string {
  const barHeight = 22;
  const gap = 10;
  // About 7 px a character at 13 px sans-serif: room for the longest name.
  const labelWidth = Math.max(200, ...rows.map((row) => row.name.length * 7 + 24));
  const chartWidth = 440;
  const top = 52;
  const height = top + rows.length * (barHeight + gap) + 34;
  const max = Math.max(2.5, ...rows.map((row) => (Number.isFinite(row.highest) ? row.highest : 0))) * 1.05;
  const x = (ratio: number) => labelWidth + (Math.max(0, ratio) / max) * chartWidth;
  const marks = rows.map((row, i) => {
    const y = top + i * (barHeight + gap);
    const quotagate = row.name.startsWith('quotagate');
    const parts = [
      `<text x="${labelWidth - 10}" y="${y + 16}" text-anchor="end">${escape(row.name)}</text>`,
      `<rect x="${labelWidth}" y="${y}" width="${(x(row.ratio) - labelWidth).toFixed(1)}" height="${barHeight}" fill="${quotagate ? '#2f6fdf' : '#9aa5b1'}"/>`,
      `<line x1="${x(row.lowest).toFixed(1)}" x2="${x(row.highest).toFixed(1)}" y1="${y + barHeight / 2}" y2="${y + barHeight / 2}" stroke="#222" stroke-width="1.5"/>`,
      `<text x="${(Math.max(x(row.highest), x(row.ratio)) + 8).toFixed(1)}" y="${y + 16}">${times(row.ratio)}</text>`,
    ];
    if (row.target !== null)
      parts.push(
        `<line x1="${x(row.target).toFixed(1)}" x2="${x(row.target).toFixed(1)}" y1="${y - 3}" y2="${y + barHeight + 3}" stroke="#d33" stroke-width="2"/>`,
      );
    return parts.join('');
  });
  const axis = top + rows.length * (barHeight + gap);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + chartWidth + 80}" height="${height}" font-family="sans-serif" font-size="13">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="16" y="24" font-size="15" font-weight="bold">${escape(title)}</text>`,
    `<text x="16" y="42" font-size="12" fill="#555">bar: median of the rounds; whisker: lowest to highest round; red tick: target</text>`,
    `<line x1="${x(1).toFixed(1)}" x2="${x(1).toFixed(1)}" y1="${top - 6}" y2="${axis}" stroke="#888" stroke-dasharray="4 3"/>`,
    `<text x="${x(1).toFixed(1)}" y="${axis + 16}" text-anchor="middle" fill="#555">1.00× ${escape(reference)}</text>`,
    ...marks,
    '</svg>',
    '',
  ].join('\n');
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
