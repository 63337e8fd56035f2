/** Bars shown per restriction: with thousands of directory users, the busiest and a count of the rest. */
export const barsShown = 20;

/** The entries with the most units first, at most `shown` of them, then how many more there are. */
export function busiestFirst<T extends { used: number }>(
  entries: readonly T[],
  shown = barsShown,
): Array<T | { more: number }> {
  const sorted = [...entries].sort((a, b) => b.used - a.used);
  return sorted.length <= shown ? sorted : [...sorted.slice(0, shown), { more: sorted.length - shown }];
}
