import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTempDirs } from '../helpers/temp-dirs.js';
import { testLayoutProblems } from '../helpers/test-layout.js';

/** A tree of its own: `files` (path → text) under a folder, with src/ and test/ in it. */
function tree(dir: string, files: Record<string, string>): { src: string; test: string } {
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  return { src: path.join(dir, 'src'), test: path.join(dir, 'test') };
}

describe('the layout of test/', () => {
  const tempDirs = useTempDirs('quotagate-test-layout-');

  it('mirrors src/, keeps helpers in test/helpers/, and no test file is over 400 lines', () => {
    expect(testLayoutProblems('src', 'test')).toEqual([]);
  });

  it('names a folder of its own, a file directly in test/, a stray helper and a long test file', () => {
    const { src, test } = tree(tempDirs.make(), {
      'src/limiter/limiter.ts': '',
      'src/cli.ts': '',
      'test/limiter/limiter.test.ts': 'it;\n',
      'test/limiter/contract.ts': '',
      'test/cli/cli.test.ts': 'it;\n'.repeat(401),
      'test/misc/other.test.ts': '',
      'test/loose.test.ts': '',
      'test/helpers/upstream.ts': '',
      'test/fixtures/plugins/plugin.ts': '',
    });
    expect(testLayoutProblems(src, test).sort()).toEqual([
      'test/cli/cli.test.ts: 401 lines, over 400; split it by behaviour',
      'test/limiter/contract.ts: a helper outside test/helpers/',
      'test/loose.test.ts: a file directly in test/; put it in the folder of what it tests',
      'test/misc/: names no folder or file of src/, and is not one of adversarial, architecture, deploy, docs, fixtures, helpers',
    ]);
  });
});
