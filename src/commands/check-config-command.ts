import { checkConfig, configSummary, onlineChecks } from './config-check.js';
import { exitCode, parseOptions, type Command } from './command.js';

export const checkConfigCommand: Command = {
  summary: 'validate the config and exit',
  help: `Usage: gateway check-config [--config-dir DIR] [--online]

Loads DIR/default.(js|yaml), the NODE_ENV overlay and the environment variables exactly as
\`gateway start\` does, and builds the authenticator of APIKeyAuthType as it does (an auth plugin is
loaded and constructed, with the config); prints every problem as <file>: <key>: <reason>, and exits.
It reaches no server unless --online says so.

Options:
  --config-dir DIR   folder of the config (default: ./conf)
  --online           also reach the servers the config names, once each: the jwt scheme's JWK Set
                     (how many keys it has, or why it could not be fetched)
  -h, --help         show this help

Exit codes: 0 valid, 1 valid but a server could not be reached (--online), 2 invalid.`,
  async run(argv) {
    const { values } = parseOptions(argv, {
      'config-dir': { type: 'string', default: 'conf' },
      online: { type: 'boolean', default: false },
    });
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    // As start does, before any listener: a plugin file that is missing, or whose constructor refuses
    // its settings, is a bad config (ConfigError, exit 2) here too.
    const loaded = await checkConfig(values['config-dir']);
    process.stdout.write(`${configSummary(loaded)}\n`);
    if (!values.online) return exitCode.ok;
    const checks = await onlineChecks(loaded);
    if (checks.length === 0) process.stdout.write('online: the config names no server to reach\n');
    for (const { ok, line } of checks) (ok ? process.stdout : process.stderr).write(`${line}\n`);
    return checks.every((check) => check.ok) ? exitCode.ok : exitCode.failure;
  },
};
