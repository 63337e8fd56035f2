import { rmSync } from 'node:fs';
import { spawnCli, startedPorts, type CliProcess } from './run-cli.js';
import { writeConfigDir } from './test-gateway.js';

/**
 * `gateway start` as an operator runs it, on a config of the test's own: the real CLI, its processes
 * (or its data-plane thread), its aggregated /metrics, its signals. Stopped by its pid after the test.
 */
export interface CliGateway {
  cli: CliProcess;
  /** The config folder. */
  dir: string;
  url: string;
  adminUrl: string;
  /** Every JSON line it wrote to stdout so far, parsed. */
  logs(): Array<Record<string, unknown>>;
  /** Its access lines so far (the config should say `accessLog.flushMs: 0`, or a signal must flush them). */
  accessLines(): Array<Record<string, unknown>>;
  /** The text of /metrics on its admin port. */
  metricsText(): Promise<string>;
  /** Resolves once `condition` holds, checked again as each line comes; rejects after `timeoutMs`. */
  until(condition: () => boolean, timeoutMs?: number): Promise<void>;
}

/**
 * Starts `gateway start --config-dir <a folder with config>` and waits until it and each of its
 * `workers` said they serve; `defer` stops it (SIGTERM to its pid, then the exit awaited) and removes
 * the folder.
 */
export async function startCliGateway(
  config: Record<string, unknown>,
  defer: (cleanup: () => Promise<void> | void) => void,
  env: NodeJS.ProcessEnv = {},
): Promise<CliGateway> {
  const dir = writeConfigDir(config);
  const cli = spawnCli(['start', '--config-dir', dir], { env });
  defer(async () => {
    if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGTERM');
    await cli.exited;
    rmSync(dir, { recursive: true, force: true });
  });
  const ports = await startedPorts(cli, 30_000);
  const logs = () =>
    cli
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  const gateway: CliGateway = {
    cli,
    dir,
    url: `http://127.0.0.1:${ports.http}`,
    adminUrl: `http://127.0.0.1:${ports.admin}`,
    logs,
    accessLines: () => logs().filter((line) => line.component === 'access'),
    metricsText: async () => (await fetch(`http://127.0.0.1:${ports.admin}/metrics`)).text(),
    until: (condition, timeoutMs = 10_000) => outputUntil(cli, condition, timeoutMs),
  };
  // Each worker says it serves through a pipe of its own, after the primary's line.
  const workers = typeof config.workers === 'number' ? config.workers : 1;
  await gateway.until(() => logs().filter((line) => line.msg === 'worker started').length === workers);
  return gateway;
}

/** Resolves once `condition` holds, checked now and after each chunk `cli` writes to stdout. */
function outputUntil(cli: CliProcess, condition: () => boolean, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    // Registered after run-cli's own listener, so that the chunk is in `cli.stdout()` when this runs.
    const check = () => {
      if (!condition()) return;
      done();
      resolve();
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`not so within ${timeoutMs} ms; stdout: ${cli.stdout().slice(-2_000)}`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      cli.child.stdout!.off('data', check);
    };
    cli.child.stdout!.on('data', check);
    check();
  });
}
