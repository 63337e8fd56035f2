export interface Row {
  name: string;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU time of the setup's process per request, in microseconds (NaN where /proc cannot tell). */
  cpuUs: number;
}

const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');

/** The Markdown table: medians of the rounds, and ratios to bare http-proxy-3 and to nginx. */
export function markdownTable(rows: readonly Row[], bare: string, nginx: string | null): string {
  const base = rows.find((row) => row.name === bare);
  const reference = nginx ? rows.find((row) => row.name === nginx) : undefined;
  const lines = [
    `| Setup | req/s | p50 ms | p99 ms | CPU µs/req | vs bare http-proxy-3 |${reference ? ' vs nginx |' : ''}`,
    `|---|---:|---:|---:|---:|---:|${reference ? '---:|' : ''}`,
  ];
  for (const row of rows) {
    const vsBase = base ? `${fixed((row.rps / base.rps) * 100, 0)}%` : '';
    const vsNginx = reference ? ` ${fixed((row.rps / reference.rps) * 100, 0)}% |` : '';
    lines.push(
      `| ${row.name} | ${fixed(row.rps, 0)} | ${fixed(row.p50Ms, 2)} | ${fixed(row.p99Ms, 2)} | ${fixed(row.cpuUs, 0)} | ${vsBase} |${vsNginx}`,
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
