/** Words and numbers as the console shows them: windows, durations, amounts. */

const units: Array<[seconds: number, singular: string]> = [
  [604_800, 'week'],
  [86_400, 'day'],
  [3_600, 'hour'],
  [60, 'minute'],
  [1, 'second'],
];

/** A window in the largest unit that divides it: 60 → "1 minute", 90 → "90 seconds". */
export function windowText(seconds: number): string {
  for (const [size, name] of units) {
    if (seconds >= size && seconds % size === 0) {
      const count = seconds / size;
      return `${count.toLocaleString('en-US')} ${name}${count === 1 ? '' : 's'}`;
    }
  }
  return `${seconds} seconds`;
}

/** A time to wait, to the second, in at most two units: 0 → "now", 75 → "1 min 15 s", 3700 → "1 h 1 min". */
export function durationText(seconds: number): string {
  const whole = Math.max(0, Math.ceil(seconds));
  if (whole === 0) return 'now';
  const parts: Array<[number, string]> = [
    [Math.floor(whole / 86_400), 'd'],
    [Math.floor((whole % 86_400) / 3_600), 'h'],
    [Math.floor((whole % 3_600) / 60), 'min'],
    [whole % 60, 's'],
  ];
  const first = parts.findIndex(([value]) => value > 0);
  return parts
    .slice(first, first + 2)
    .filter(([value]) => value > 0)
    .map(([value, unit]) => `${value} ${unit}`)
    .join(' ');
}

const bytesPerMb = 1_048_576;

/** What a restriction counts, as the admin API's usage names it. */
export type UsageUnit = 'messages' | 'bytes' | 'units' | 'concurrent-requests';

/**
 * An amount of a restriction's unit: "1,234 messages", "1.5 MB", "512 bytes", "10,000 units", "5
 * requests in flight".
 */
export function amountText(amount: number, unit: UsageUnit): string {
  if (unit === 'concurrent-requests')
    return `${amount.toLocaleString('en-US')} request${amount === 1 ? '' : 's'} in flight`;
  if (unit !== 'bytes') {
    const word = unit === 'messages' ? 'message' : 'unit';
    return `${amount.toLocaleString('en-US')} ${word}${amount === 1 ? '' : 's'}`;
  }
  if (amount < 1024) return `${amount} byte${amount === 1 ? '' : 's'}`;
  if (amount < bytesPerMb)
    return `${(amount / 1024).toLocaleString('en-US', { maximumFractionDigits: 1 })} KB`;
  return `${(amount / bytesPerMb).toLocaleString('en-US', { maximumFractionDigits: 2 })} MB`;
}

/** How full a counter is, 0–100, and the word for it: the bar's length and colour. */
export function fillOf(used: number, limit: number): { percent: number; level: 'ok' | 'high' | 'full' } {
  const percent = limit > 0 ? Math.min(100, (used / limit) * 100) : 0;
  return { percent, level: percent >= 100 ? 'full' : percent >= 80 ? 'high' : 'ok' };
}
