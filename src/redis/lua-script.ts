import { readFileSync } from 'node:fs';

/** The text of `lua/<name>.lua` next to the module at `moduleUrl` (pass `import.meta.url`). */
export function readLuaScript(moduleUrl: string, name: string): string {
  return readFileSync(new URL(`./lua/${name}.lua`, moduleUrl), 'utf8');
}
