import { checkConfig, configSummary } from './config-check.js';
import { exitCode, parseOptions, type Command } from './command.js';

export const checkConfigCommand: Command = {
  summary: 'validate the config and exit',
  help: `Usage: gateway check-config [--config-dir DIR]

Loads DIR/default.(js|yaml), the NODE_ENV overlay and the environment variables exactly as
\`gateway start\` does, and builds the authenticator of APIKeyAuthType as it does (an auth plugin is
loaded and constructed, with the config); prints every problem as <file>: <key>: <reason>, and exits.

Options:
  --config-dir DIR   folder of the config (default: ./conf)
  -h, --help         show this help

Exit codes: 0 valid, 2 invalid.`,
  async run(argv) {
    const { values } = parseOptions(argv, { 'config-dir': { type: 'string', default: 'conf' } });
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    // As start does, before any listener: a plugin file that is missing, or whose constructor refuses
    // its settings, is a bad config (ConfigError, exit 2) here too.
    process.stdout.write(`${configSummary(await checkConfig(values['config-dir']))}\n`);
    return exitCode.ok;
  },
};
