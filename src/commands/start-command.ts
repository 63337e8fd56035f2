import cluster from 'node:cluster';
import { loadConfig } from '../config/load-config.js';
import { generateApiKey } from '../init/generate-api-key.js';
import { LogSecrets, createLogger } from '../observe/log.js';
import { defaultPidFile, removePidFile, writePidFile } from '../kit/pid-file.js';
import { secretValues } from '../kit/secret-redaction.js';
import { envOf } from '../runtime/env.js';
import { startPrimary } from '../runtime/primary.js';
import type { RunningGateway } from '../runtime/running-gateway.js';
import { runWorkerProcess } from '../runtime/worker.js';
import { workerCount } from '../workers/worker-count.js';
import { exitCode, parseOptions, type Command } from './command.js';
import { demoBanner, startDemo } from './demo-run.js';

export const startCommand: Command = {
  summary: 'run the gateway',
  help: `Usage: gateway start [--config-dir DIR] [--pid-file FILE] [--demo]

Loads the config (see gateway check-config) and runs the admin listener, and the data plane in a
thread of its own, until SIGTERM or SIGINT, then shuts down gracefully: no new connections, in-flight
requests get shutdownTimeout milliseconds to finish, exit 0. With \`workers: N\` (N > 1, or 'auto')
this process runs the admin listener and N worker processes behind the same data-plane ports, and
drains them all.

SIGHUP (or gateway reload) reads the config again and puts it in force without a restart: requests
in flight finish on the old config, counters and connections stay. A config with a mistake is
refused whole and the running one stays; settings that need a restart (ports, hosts, workers,
store, server timeouts, TLS on or off) are kept and named in the log. SIGUSR2 writes the access lines
gathered so far and opens accessLog.file again (for logrotate), without reading the config.

Options:
  --config-dir DIR   folder of the config (default: ./conf)
  --pid-file FILE    where to write this process's id for gateway reload (default: ${defaultPidFile})
  --demo             also start the demo upstream behind the first API, make up a development
                     key for this run when the config has none, and print two curl lines
  -h, --help         show this help

Environment: NODE_ENV (production selects apikey_production and conf/production.js), PORT,
ADMIN_PORT, REDIS_URL, LOG_LEVEL; the shipped conf/default.js (and one gateway init writes) points
its API at DEMO_UPSTREAM_PORT (default 9000), where --demo starts the demo upstream.

Exit codes: 0 stopped cleanly, 1 runtime failure, 2 bad usage or bad config.`,
  async run(argv) {
    const { values } = parseOptions(argv, {
      'config-dir': { type: 'string', default: 'conf' },
      'pid-file': { type: 'string', default: defaultPidFile },
      demo: { type: 'boolean', default: false },
    });
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    // The demo config reads its secrets from the environment, so that none is ever committed.
    if (values.demo && process.env.NODE_ENV !== 'production') {
      process.env.APIKEY_DEVELOPMENT ??= generateApiKey();
      process.env.QUOTAGATE_ADMIN_PASSWORD ??= generateApiKey().slice(0, 24);
    }
    const source = { read: () => loadConfig({ configDir: values['config-dir'] }) };
    const loaded = await source.read();
    const secrets = new LogSecrets(secretValues({ ...loaded.extras, ...loaded.config }));
    const logger = createLogger({ secrets });
    // A worker of `workers: N` runs this command again; the primary has said the rest.
    if (cluster.isWorker) return runWorkerProcess(loaded, { logger, source, secrets });

    const workers = workerCount(loaded.config);
    // Heard from the start to the exit: either signal's default action would end the process.
    let running: RunningGateway | null = null;
    let stopping = false;
    const reload = () => {
      if (!running || stopping) {
        logger.warn({ signal: 'SIGHUP' }, 'the gateway is starting or stopping: no reload');
        return;
      }
      logger.info({ signal: 'SIGHUP' }, 'reloading the config');
      void running.reload();
    };
    // logrotate's `postrotate` may send SIGUSR2 instead: the access lines gathered are written, and
    // accessLog.file is opened again, without reading conf/.
    const reopenLogs = () => running?.reopenLogs();
    process.on('SIGHUP', reload);
    process.on('SIGUSR2', reopenLogs);
    const demo = values.demo ? await startDemo(loaded) : null;
    try {
      running = await startPrimary(loaded, envOf({ logger, secrets }), {
        workers,
        source,
        configDir: values['config-dir'],
      });
    } catch (error) {
      process.off('SIGHUP', reload);
      process.off('SIGUSR2', reopenLogs);
      await demo?.close();
      throw error;
    }
    const gateway = running;
    if (values.demo) process.stderr.write(demoBanner(loaded, gateway));
    const pidFile = values['pid-file'];
    writePidFile(pidFile);
    // Said once the pid file is there: a script that waits for this line may run `gateway reload` at once.
    const { config } = loaded;
    logger.info(
      {
        ports: gateway.ports,
        workers,
        auth: config.APIKeyAuthType,
        store: config.store.type,
        apis: config.apis.length,
      },
      'gateway started',
    );

    return new Promise((resolve) => {
      const stop = (signal: NodeJS.Signals) => {
        if (stopping) {
          logger.warn({ signal }, 'second signal, exiting at once');
          resolve(exitCode.failure);
          return;
        }
        stopping = true;
        removePidFile(pidFile);
        logger.info({ signal }, 'shutting down');
        gateway
          .close()
          .then(() => demo?.close())
          .then(
            () => resolve(exitCode.ok),
            (error: unknown) => {
              logger.error({ err: error }, 'shutdown failed');
              resolve(exitCode.failure);
            },
          );
      };
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
    });
  },
};
