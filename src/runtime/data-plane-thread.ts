import { parentPort, threadId, workerData } from 'node:worker_threads';
import { loadConfig } from '../config/load-config.js';
import { ConfigError } from '../kit/config-error.js';
import { beforeDeadline } from '../kit/deadline.js';
import { exitCode } from '../kit/exit-codes.js';
import { secretValues } from '../kit/secret-redaction.js';
import { LogSecrets, createLogger, logWritten, type Logger } from '../observe/log.js';
import { IpcPeer, parentEndpoint, type StartFailure } from '../workers/ipc-peer.js';
import { runWorker } from './worker.js';
import type { DataPlaneThreadData } from '../workers/worker-pool.js';

/**
 * The data-plane thread of `workers: 1` (src/workers/worker-pool.ts starts it): it loads the config the
 * primary loaded and serves the data plane, fed by the primary over `parentPort`. Its import graph holds
 * no admin module (a dependency-cruiser rule), so fastify and the OpenAPI libraries stay in the primary's
 * heap, out of the one that serves every request.
 */

/** How long the primary has to take the reason this thread could not start. */
const reportFailureMs = 1_000;
/** How long the log has to write what it holds before the thread exits. */
const logWriteMs = 1_000;

if (!parentPort)
  throw new Error('this module is the data-plane thread that gateway start starts; it runs in no other way');
const primary = new IpcPeer(parentEndpoint(parentPort));
let logger: Logger | null = null;

async function serve(): Promise<number> {
  const { configDir } = workerData as DataPlaneThreadData;
  const source = { read: () => loadConfig({ configDir }) };
  const loaded = await source.read();
  const secrets = new LogSecrets(secretValues({ ...loaded.extras, ...loaded.config }));
  logger = createLogger({ secrets });
  return runWorker(loaded, { logger, source, secrets, primary, id: threadId, hearsSignals: false });
}

const failure = (error: unknown): StartFailure =>
  error instanceof ConfigError
    ? { problems: [...error.problems] }
    : { message: error instanceof Error ? error.message : String(error) };

// runWorker rejects only before the data plane listens: the primary fails its start with the reason
// (`gateway start` prints it once, as a gateway in one thread did), or, replacing a thread that exited,
// logs it.
const code = await serve().catch(async (error: unknown) => {
  await beforeDeadline(primary.request('failed', failure(error)), reportFailureMs).catch(() => undefined);
  return exitCode.failure;
});
// process.exit drops what the log has not written yet, a write already running included.
if (logger) await logWritten(logger, logWriteMs);
process.exit(code);
