import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inRuntime } from '../helpers/deploy-files.js';
import {
  buildStage,
  buildStages,
  checkoutFiles,
  contextFiles,
  repository,
  type RunResult,
} from '../helpers/image-build.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/**
 * deploy/Dockerfile's build stage, built from exactly the files its build context lets in (no Docker
 * engine runs here): a build step that needs a file the context or the COPY lines leave out fails here,
 * as it would fail `docker build`, Compose and every Kubernetes rollout of the image.
 */
const tempDirs = useTempDirs('quotagate-image-');

/**
 * The stage's `npm ci` would download every package of package-lock.json again: the checkout's
 * node_modules, installed from the same lock file by `npm ci` (.ci/run does), stands in for it. Only an
 * install of every dependency can be stood in for so: one that omits some would find more here than in
 * the image.
 */
function npmCiStandIn(command: string): string {
  return command.replace(/\bnpm ci\b[^&;|]*/g, (install) => {
    if (/--omit|--only|--production/.test(install))
      throw new Error(`${install}: the checkout's node_modules cannot stand in for it`);
    return `ln -s '${repository}/node_modules' node_modules`;
  });
}

describe("the image's build stage", () => {
  it(
    'builds from the files its context lets in, and leaves what the runtime stage copies from it',
    { timeout: 300_000 },
    async () => {
      const context = contextFiles(await checkoutFiles());
      const built = buildStages();
      expect(built.length).toBeGreaterThan(0);
      for (const { name, instructions } of built) {
        const root = tempDirs.make();
        const runs: RunResult[] = await buildStage(instructions, context, root, npmCiStandIn);
        expect(runs.some((run) => run.command.includes('npm run build'))).toBe(true);
        for (const run of runs) expect(run.exitCode, `${run.command}\n${run.output}`).toBe(0);
        const taken = inRuntime('COPY')
          .filter((instruction) => instruction.flags.from === name)
          .flatMap((instruction) => instruction.words.slice(0, -1));
        expect(taken.length).toBeGreaterThan(0);
        for (const source of taken) expect(existsSync(path.join(root, source)), source).toBe(true);
      }
    },
  );
});
