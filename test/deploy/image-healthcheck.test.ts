import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runHealthcheck } from '../helpers/deploy-files.js';
import { spawnCli, startedPorts, type CliProcess } from '../helpers/run-cli.js';
import { adminUser, petsConfig, writeSeedConfigDir } from '../helpers/test-gateway.js';
import { createTestCertificate } from '../helpers/tls-cert.js';

/**
 * The image's HEALTHCHECK, run with node as the container runtime runs it, against `gateway start` with
 * the admin listener over plain HTTP and over HTTPS (`admin.tls`): a gateway that runs is healthy
 * whichever it serves, and one that stopped is not.
 */
const running: Array<{ cli: CliProcess; dirs: string[] }> = [];
afterEach(async () => {
  for (const { cli, dirs } of running.splice(0)) {
    if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGTERM');
    await cli.exited;
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
});

/** `gateway start` with `admin` over the test config's admin settings; answers the process and its admin port. */
async function start(admin: Record<string, unknown>, dirs: string[] = []) {
  const dir = writeSeedConfigDir(
    petsConfig('http://127.0.0.1:9/pets', {
      admin: { host: '127.0.0.1', port: 0, users: [adminUser], ...admin },
    }),
  );
  const cli = spawnCli(['start', '--config-dir', dir, '--pid-file', path.join(dir, 'gateway.pid')]);
  running.push({ cli, dirs: [dir, ...dirs] });
  return { cli, adminPort: (await startedPorts(cli, 30_000)).admin };
}

describe("the image's HEALTHCHECK", () => {
  it('passes while gateway start serves its admin listener over HTTPS (admin.tls), and fails once it stopped', async () => {
    const certificate = await createTestCertificate();
    const { cli, adminPort } = await start(
      { tls: { key: certificate.keyFile, cert: certificate.certFile } },
      [certificate.dir],
    );
    expect(await runHealthcheck(adminPort)).toBe(0);
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    expect(await runHealthcheck(adminPort)).not.toBe(0);
  }, 60_000);

  it('passes while gateway start serves its admin listener over plain HTTP', async () => {
    const { adminPort } = await start({});
    expect(await runHealthcheck(adminPort)).toBe(0);
  }, 60_000);
});
