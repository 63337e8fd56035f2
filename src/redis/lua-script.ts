import { readFileSync } from 'node:fs';

/**
 * The text of `lua/<name>.lua` next to the module at `moduleUrl` (pass `import.meta.url`), after the
 * texts of `preludes` from the same folder: functions that several scripts share, said once.
 */
export function readLuaScript(moduleUrl: string, name: string, preludes: readonly string[] = []): string {
  const read = (file: string) => readFileSync(new URL(`./lua/${file}.lua`, moduleUrl), 'utf8');
  return [...preludes.map(read), read(name)].join('\n');
}
