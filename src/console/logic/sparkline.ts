/**
 * The points of a sparkline of counts (oldest first) in a box of `width` × `height`: the SVG polyline's
 * `points`. The highest count touches the top; a line of zeros lies on the bottom edge.
 */
export function sparklinePoints(counts: readonly number[], width: number, height: number): string {
  if (counts.length === 0) return '';
  const highest = Math.max(1, ...counts);
  const step = counts.length > 1 ? width / (counts.length - 1) : 0;
  const round = (value: number) => Math.round(value * 10) / 10;
  return counts
    .map((count, i) => `${round(i * step)},${round(height - (count / highest) * height)}`)
    .join(' ');
}
