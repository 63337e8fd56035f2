import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { filesUnder } from './files-under.js';

/**
 * The rules test/ keeps (docs/development.md#tests): its folders mirror src/, helpers live in one place,
 * and no test file grows past what a reader takes in at once.
 */
export const testLayout = {
  /** Folders of test/ that name no part of src/: what they hold cuts across the layers. */
  crossCutting: ['adversarial', 'architecture', 'deploy', 'docs', 'fixtures', 'helpers'],
  /** Where modules that are not tests live. */
  helpers: 'helpers',
  /** Data, not code the suite runs: configs, plugins and projects the tests load. */
  fixtures: 'fixtures',
  maxTestFileLines: 400,
} as const;

/** What in `testDir` breaks the rules, one sentence each, given the `srcDir` it mirrors. */
export function testLayoutProblems(srcDir: string, testDir: string): string[] {
  const srcParts = new Set(
    readdirSync(srcDir, { withFileTypes: true }).map((entry) =>
      entry.isDirectory() ? entry.name : entry.name.replace(/\.ts$/, ''),
    ),
  );
  const problems: string[] = [];
  for (const entry of readdirSync(testDir, { withFileTypes: true })) {
    const name = entry.name;
    if (!entry.isDirectory()) {
      problems.push(`test/${name}: a file directly in test/; put it in the folder of what it tests`);
    } else if (!srcParts.has(name) && !(testLayout.crossCutting as readonly string[]).includes(name)) {
      problems.push(
        `test/${name}/: names no folder or file of src/, and is not one of ${testLayout.crossCutting.join(', ')}`,
      );
    }
  }
  for (const file of filesUnder(testDir)) {
    const relative = path.relative(testDir, file).split(path.sep).join('/');
    const [folder] = relative.split('/');
    if (folder === testLayout.fixtures || !/\.[cm]?ts$/.test(file)) continue;
    if (!/\.test\.ts$/.test(file)) {
      if (folder !== testLayout.helpers)
        problems.push(`test/${relative}: a helper outside test/${testLayout.helpers}/`);
      continue;
    }
    const lines = readFileSync(file, 'utf8').split('\n').length - 1;
    if (lines > testLayout.maxTestFileLines) {
      problems.push(
        `test/${relative}: ${lines} lines, over ${testLayout.maxTestFileLines}; split it by behaviour`,
      );
    }
  }
  return problems;
}
