import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

export interface TempDirs {
  /** A fresh empty folder under the system's temporary folder. */
  make(): string;
  /** Removes a folder made elsewhere with the suite's own. */
  removeAfter(dir: string): void;
}

/** Folders of a suite, removed after it. */
export function useTempDirs(prefix: string): TempDirs {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return {
    make() {
      const dir = mkdtempSync(path.join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
    removeAfter(dir) {
      dirs.push(dir);
    },
  };
}
