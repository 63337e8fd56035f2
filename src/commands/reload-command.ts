import { defaultPidFile, readPidFile } from '../kit/pid-file.js';
import { checkConfig, configSummary } from './config-check.js';
import { exitCode, parseOptions, type Command } from './command.js';

export const reloadCommand: Command = {
  summary: 'check the config, then have the running gateway reload it',
  help: `Usage: gateway reload [--config-dir DIR] [--pid-file FILE]

Checks the config as gateway check-config does; with any mistake it prints them all, exits 2 and
leaves the running gateway alone. Otherwise it sends SIGHUP to the gateway whose process id FILE
holds (gateway start writes it): the gateway reads the config again and puts it in force without a
restart. The gateway's log then says "config reloaded", or why it refused; /metrics has
quotagate_config_last_reload_successful.

Options:
  --config-dir DIR   folder of the config (default: ./conf)
  --pid-file FILE    the running gateway's process id (default: ${defaultPidFile})
  -h, --help         show this help

Exit codes: 0 asked, 1 no gateway runs with that process id, 2 invalid config.`,
  async run(argv) {
    const { values } = parseOptions(argv, {
      'config-dir': { type: 'string', default: 'conf' },
      'pid-file': { type: 'string', default: defaultPidFile },
    });
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    const loaded = await checkConfig(values['config-dir']);
    const pidFile = values['pid-file'];
    const pid = readPidFile(pidFile);
    if (pid === null) {
      process.stderr.write(`gateway reload: ${pidFile} holds no process id: is the gateway running here?\n`);
      return exitCode.failure;
    }
    try {
      process.kill(pid, 'SIGHUP');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      process.stderr.write(
        `gateway reload: cannot signal process ${pid} of ${pidFile} (${code}): ${code === 'ESRCH' ? 'the gateway is not running (the file is stale)' : 'it belongs to another user'}\n`,
      );
      return exitCode.failure;
    }
    process.stdout.write(
      `${configSummary(loaded)}\nasked the gateway (process ${pid}) to reload it; its log says "config reloaded" or why it refused\n`,
    );
    return exitCode.ok;
  },
};
