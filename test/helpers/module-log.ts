import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * A record of the ES modules a Node process (and every process it forks) resolves whose URL has `marker`:
 * a module resolve hook (`module.register`) that the child is given through `NODE_OPTIONS=--import`.
 */
export interface ModuleLog {
  /** The environment the child is started with. */
  env: NodeJS.ProcessEnv;
  /** The URLs resolved so far. */
  urls(): string[];
  remove(): void;
}

export function moduleLog(marker: string): ModuleLog {
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-modules-'));
  const log = path.join(dir, 'resolved.txt');
  writeFileSync(log, '');
  writeFileSync(
    path.join(dir, 'hooks.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  if (result.url.includes(${JSON.stringify(marker)})) appendFileSync(${JSON.stringify(log)}, result.url + '\\n');
  return result;
}
`,
  );
  writeFileSync(
    path.join(dir, 'register.mjs'),
    `import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n`,
  );
  return {
    env: { NODE_OPTIONS: `--import=${pathToFileURL(path.join(dir, 'register.mjs')).href}` },
    urls: () => readFileSync(log, 'utf8').split('\n').filter(Boolean),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
