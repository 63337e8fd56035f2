import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * npm 11 runs no install script of a dependency that package.json's `allowScripts` does not name, and
 * `npm ci` ends with a warning for each one it skipped ("not yet covered by allowScripts"). Every
 * package of the lock file that has one is decided in package.json, so that an install says nothing and
 * a new one is a decision, not a warning read past.
 */
const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as {
  allowScripts?: Record<string, boolean>;
};
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
  packages: Record<string, { version?: string; hasInstallScript?: boolean }>;
};

/** `node_modules/a/node_modules/@scope/b` → `@scope/b`. */
const packageName = (lockPath: string) => lockPath.slice(lockPath.lastIndexOf('node_modules/') + 13);

describe('the install scripts of the dependencies', () => {
  it('are each allowed or denied by name in package.json', () => {
    const withScripts = Object.entries(lock.packages)
      .filter(([lockPath, entry]) => lockPath !== '' && entry.hasInstallScript === true)
      .map(([lockPath, entry]) => `${packageName(lockPath)}@${entry.version}`);
    expect(withScripts.length).toBeGreaterThan(0);
    const decided = new Set(Object.keys(manifest.allowScripts ?? {}));
    expect(withScripts.filter((spec) => !decided.has(spec.slice(0, spec.lastIndexOf('@'))))).toEqual([]);
  });

  it('are all denied: the project needs none of them (native add-ons of the test tools, a banner, a version hint)', () => {
    expect(Object.values(manifest.allowScripts ?? {})).not.toContain(true);
  });
});
