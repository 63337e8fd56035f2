import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { runCli, spawnCli, startedPorts } from '../helpers/run-cli.js';
import { basicAuth, devKey, petsConfig } from '../helpers/test-gateway.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/**
 * A conf/ mounted over the image's /app/conf, as deploy/README.md tells deployments to do: the image's
 * package.json (`"type": "module"`) is above it, and the mounted folder brings no package.json of its
 * own. A config written as the README's examples are (`module.exports = …` in default.js) is read as
 * CommonJS; one written as an ES module still loads; a package.json in the folder itself still decides.
 */
const tempDirs = useTempDirs('quotagate-mounted-conf-');
const mobileKey = 'app-key-0123456789abcdef0123456789';

/** The image's layout: /app/package.json of an ES module package, and /app/conf with `files`. */
function imageLayout(files: Record<string, string>): string {
  const app = tempDirs.make();
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'quotagate', type: 'module' }));
  mkdirSync(path.join(app, 'conf'));
  mkdirSync(path.join(app, 'data'));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(app, 'conf', name), text);
  return app;
}

const config = (extra: Record<string, unknown> = {}) =>
  JSON.stringify(petsConfig('http://127.0.0.1:9/pets', extra), null, 2);

/** The status of a GET on the data plane with `key`. */
const statusWith = (url: string, key: string) =>
  new Promise<number>((resolve, reject) => {
    http
      .get(`${url}/pets/1`, { agent: false, headers: { authorization: basicAuth(key) } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject);
  });

describe("a conf/ mounted over the image's /app/conf, without a package.json of its own", () => {
  it('gateway start reads a CommonJS default.js, and a SIGHUP reads it again as edited', async () => {
    const app = imageLayout({ 'default.js': `module.exports = ${config()};\n` });
    const cli = spawnCli(['start', '--pid-file', path.join(app, 'gateway.pid')], { cwd: app });
    try {
      const url = `http://127.0.0.1:${(await startedPorts(cli, 30_000)).http}`;
      // The upstream (port 9) is closed: a request the key lets in gets as far as a 502.
      expect(await statusWith(url, devKey)).toBe(502);
      expect(await statusWith(url, mobileKey)).toBe(401);
      const mobile = {
        id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f',
        name: 'Mobile app',
        apikey_development: mobileKey,
      };
      writeFileSync(
        path.join(app, 'conf', 'default.js'),
        `module.exports = ${config({ applications: [mobile] })};\n`,
      );
      cli.child.kill('SIGHUP');
      await cli.waitFor('"msg":"config reloaded"', 20_000);
      expect(await statusWith(url, mobileKey)).toBe(502);
    } finally {
      cli.child.kill('SIGTERM');
      expect((await cli.exited).code).toBe(0);
    }
  }, 60_000);

  it('check-config reads an ES module default.js there too', async () => {
    const app = imageLayout({ 'default.js': `export default ${config()};\n` });
    const result = await runCli(['check-config'], { cwd: app });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('a package.json of "type": "module" in the folder itself still makes default.js an ES module, and the loader says to rename it', async () => {
    const app = imageLayout({
      'package.json': JSON.stringify({ type: 'module' }),
      'default.js': `module.exports = ${config()};\n`,
    });
    const result = await runCli(['check-config'], { cwd: app });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('(the file is CommonJS in an ESM package: rename it to default.cjs)');
  });
});
