/**
 * Each item's name, or its id where two items share the name: what metrics and logs call APIs, methods
 * and quotas, so that people read names and no two items share a label.
 */
export function uniqueLabels(items: ReadonlyArray<{ id: string; name: string }>): Map<string, string> {
  const uses = new Map<string, number>();
  for (const { name } of items) uses.set(name, (uses.get(name) ?? 0) + 1);
  return new Map(items.map(({ id, name }) => [id, uses.get(name) === 1 ? name : id]));
}
