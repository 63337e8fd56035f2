import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * The import rules `npm run lint` holds src/ to (.dependency-cruiser.cjs, docs/architecture.md): shown to
 * fail on a fixture that breaks them, so that a rule that stopped checking would be seen.
 */
const run = promisify(execFile);

async function cruise(target: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout } = await run(process.execPath, [
      'node_modules/dependency-cruiser/bin/dependency-cruise.mjs',
      target,
      '--config',
      '.dependency-cruiser.cjs',
    ]);
    return { code: 0, output: stdout };
  } catch (error) {
    const failed = error as { code: number; stdout: string };
    return { code: failed.code, output: failed.stdout };
  }
}

describe('the import rules', () => {
  it('refuse an import cycle, type-only imports included, naming the files around it', async () => {
    const { code, output } = await cruise('test/fixtures/import-cycle');
    expect(code).not.toBe(0);
    expect(output).toContain('error no-circular: test/fixtures/import-cycle/a.ts');
    expect(output).toContain('test/fixtures/import-cycle/b.ts');
  });
});
