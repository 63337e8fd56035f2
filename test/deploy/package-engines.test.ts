import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

/**
 * Every package the lock file installs runs on the oldest Node the README and package.json promise: a
 * dependency that needs a newer one (cookie@2 needs Node 22) warns EBADENGINE at install and may break
 * at run time.
 */
const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
  packages: Record<string, { version?: string; engines?: { node?: string } | string[] }>;
};

describe('the engines of the installed packages', () => {
  it('all admit the oldest Node of package.json', () => {
    const oldest = semver.minVersion(manifest.engines.node)!.version;
    const refusing = Object.entries(lock.packages)
      .filter(([name]) => name !== '')
      .flatMap(([name, entry]) => {
        const wanted = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
        return wanted && !semver.satisfies(oldest, wanted)
          ? [`${name}@${entry.version}: node ${wanted}`]
          : [];
      });
    expect(refusing, `Node ${oldest}`).toEqual([]);
  });
});
