import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Parts are built in src/runtime/ alone (docs/architecture.md): a file elsewhere that imports from 8 or
 * more folders of src/ is wiring parts together, and the wiring belongs in runtime/.
 */
const limit = 8;

/** Every .ts file under `dir`. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(file);
    return entry.name.endsWith('.ts') ? [file] : [];
  });
}

/** The room of `file` in `src`: its top-level folder, or its own name for a file directly in src/. */
const roomOf = (src: string, file: string) => path.relative(src, file).split(path.sep)[0]!;

/**
 * The other rooms of `src` that `text` (the source of `file`) imports from: static imports and
 * re-exports, type-only ones included, and dynamic `import()`.
 */
export function importedRooms(src: string, file: string, text: string): Set<string> {
  const rooms = new Set<string>();
  const specifiers = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;
  for (const [, specifier] of text.matchAll(specifiers)) {
    // ESM imports name the compiled .js of a .ts source.
    const target = path.resolve(path.dirname(file), specifier!.replace(/[.]js$/, '.ts'));
    if (!target.startsWith(src + path.sep)) continue;
    rooms.add(roomOf(src, target));
  }
  rooms.delete(roomOf(src, file));
  return rooms;
}

describe('the composition root', () => {
  it('is src/runtime/: no file elsewhere imports from 8 or more folders of src/', () => {
    const src = path.resolve('src');
    const wide = sourceFiles(src)
      .filter((file) => roomOf(src, file) !== 'runtime')
      .map((file) => ({ file, rooms: importedRooms(src, file, readFileSync(file, 'utf8')) }))
      .filter(({ rooms }) => rooms.size >= limit)
      .map(
        ({ file, rooms }) => `${path.relative(src, file)}: ${rooms.size} (${[...rooms].sort().join(', ')})`,
      );
    expect(wide).toEqual([]);
  });

  it('counts the distinct folders a file imports from, types and re-exports included, not its own', () => {
    const src = path.resolve('src');
    const file = path.join(src, 'commands', 'a.ts');
    const text = [
      "import { a } from '../kit/a.js';",
      "import type { B } from '../kit/b.js';",
      "export { c } from '../observe/c.js';",
      "import { d } from './d.js';",
      "import '../config/e.js';",
      "const f = await import('../server.js');",
      "import http from 'node:http';",
    ].join('\n');
    expect([...importedRooms(src, file, text)].sort()).toEqual(['config', 'kit', 'observe', 'server.ts']);
  });
});
