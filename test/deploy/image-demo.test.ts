import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readConfigFile } from '../../src/config/read-config-file.js';
import { inRuntime, readDeploy } from '../helpers/deploy-files.js';
import { freePort } from '../helpers/free-port.js';
import { listeningAddresses } from '../helpers/listening-addresses.js';
import { spawnCli } from '../helpers/run-cli.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/**
 * deploy/README.md's `docker run … start --demo`, checked without a Docker engine: what the command
 * publishes, against the ports of the image's conf/ (the repository's), and where `gateway start --demo`
 * listens with the image's environment. A port reaches the host only when it is published and the
 * gateway listens on the container's interface, not on its loopback alone.
 */
const tempDirs = useTempDirs('quotagate-image-demo-');

/** The README's command, and each `-p [host:]hostPort:containerPort` of it. */
function readmeDemoRun() {
  const command = /^docker run (.*) quotagate node dist\/cli\.js start --demo\b.*$/m.exec(
    readDeploy('README.md'),
  );
  expect(command, 'deploy/README.md has the docker run … start --demo line').not.toBeNull();
  return [...command![1]!.matchAll(/-p (?:(\S+):)?(\d+):(\d+)\b/g)].map(([, host, , container]) => ({
    host: host ?? '0.0.0.0',
    container: Number(container),
  }));
}

/** The ENV lines of the image's runtime stage. */
const imageEnv = () =>
  Object.fromEntries(inRuntime('ENV').map((instruction) => instruction.args.split('=') as [string, string]));

describe("the image's demo, as deploy/README.md runs it", () => {
  it('publishes the data port and the console port the banner names, the console on the host’s 127.0.0.1 only', async () => {
    const conf = await readConfigFile(path.resolve('conf/default.js'), 'conf/default.js');
    const ports = { data: conf.port as number, admin: (conf.admin as { port: number }).port };
    const published = readmeDemoRun();
    expect(published.find((each) => each.container === ports.data)).toBeDefined();
    expect(published.find((each) => each.container === ports.admin)).toEqual({
      host: '127.0.0.1',
      container: ports.admin,
    });
  });

  it("with the image's environment, listens for the console and the data plane on the container's interfaces, so the published ports reach them", async () => {
    const cwd = tempDirs.make();
    const cli = spawnCli(['start', '--demo', '--config-dir', path.resolve('conf')], {
      cwd,
      env: { ...imageEnv(), PORT: '0', ADMIN_PORT: '0', DEMO_UPSTREAM_PORT: String(await freePort()) },
    });
    try {
      await cli.waitFor('Ctrl-C stops it.', 30_000);
      const banner = cli.stderr();
      const console = /console {5}http:\/\/127\.0\.0\.1:(\d+)\//.exec(banner);
      const gateway = /gateway {2}http:\/\/127\.0\.0\.1:(\d+)/.exec(banner);
      expect(console, banner).not.toBeNull();
      expect(listeningAddresses(Number(console![1]))).toEqual(['00000000']);
      expect(listeningAddresses(Number(gateway![1]))).toEqual(['00000000']);
    } finally {
      cli.child.kill('SIGTERM');
      expect((await cli.exited).code).toBe(0);
    }
  }, 60_000);
});
