import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * The import rules `npm run lint` holds src/ to (.dependency-cruiser.cjs, docs/architecture.md): shown to
 * fail on a fixture that breaks them, so that a rule that stopped checking would be seen.
 */
const run = promisify(execFile);

async function cruise(target: string, cwd = process.cwd()): Promise<{ code: number; output: string }> {
  try {
    const { stdout } = await run(
      process.execPath,
      [
        path.resolve('node_modules/dependency-cruiser/bin/dependency-cruise.mjs'),
        target,
        '--config',
        path.resolve('.dependency-cruiser.cjs'),
      ],
      { cwd },
    );
    return { code: 0, output: stdout };
  } catch (error) {
    const failed = error as { code: number; stdout: string };
    return { code: failed.code, output: failed.stdout };
  }
}

/** A project of its own whose src/ holds `files` (path → text), with a tsconfig as the repository's. */
function project(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-layers-'));
  writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }),
  );
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

describe('the import rules', () => {
  it('refuse an import up the layers (quota importing admin), naming the rule and the files', async () => {
    const dir = project({
      'src/admin/routes.ts': "export const route = '/quotas';\n",
      'src/quota/plan.ts': "import { route } from '../admin/routes.js';\n\nexport const plan = route;\n",
    });
    try {
      const { code, output } = await cruise('src', dir);
      expect(code).not.toBe(0);
      expect(output).toContain('error layer-quota: src/quota/plan.ts → src/admin/routes.ts');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('take an import down the layers (admin importing quota)', async () => {
    const dir = project({
      'src/quota/plan.ts': "export const plan = 'plan';\n",
      'src/admin/routes.ts': "import { plan } from '../quota/plan.js';\n\nexport const route = plan;\n",
    });
    try {
      expect(await cruise('src', dir)).toMatchObject({ code: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuse a data plane run apart that reaches the admin listener, even through a module allowed to import it', async () => {
    const dir = project({
      'src/admin/admin-server.ts': "export const admin = 'admin';\n",
      'src/runtime/control-plane.ts':
        "import { admin } from '../admin/admin-server.js';\n\nexport const control = admin;\n",
      'src/runtime/worker.ts':
        "import { control } from './control-plane.js';\n\nexport const worker = control;\n",
    });
    try {
      const { code, output } = await cruise('src', dir);
      expect(code).not.toBe(0);
      expect(output).toContain(
        'error data-plane-without-admin: src/runtime/worker.ts → src/admin/admin-server.ts',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuse an import cycle, type-only imports included, naming the files around it', async () => {
    const { code, output } = await cruise('test/fixtures/import-cycle');
    expect(code).not.toBe(0);
    expect(output).toContain('error no-circular: test/fixtures/import-cycle/a.ts');
    expect(output).toContain('test/fixtures/import-cycle/b.ts');
  });
});
