import { loadConfig } from '../config/load-config.js';
import { exitCode, parseOptions, type Command } from './command.js';

export const checkConfigCommand: Command = {
  summary: 'validate the config and exit',
  help: `Usage: gateway check-config [--config-dir DIR]

Loads DIR/default.(js|yaml), the NODE_ENV overlay and the environment variables exactly as
\`gateway start\` does, prints every problem as <file>: <key>: <reason>, and exits.

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
    const loaded = await loadConfig({ configDir: values['config-dir'] });
    for (const warning of loaded.warnings) process.stderr.write(`warning: ${warning}\n`);
    const { config } = loaded;
    process.stdout.write(
      `config ok (${loaded.environment}): ${config.apis.length} APIs, APIKeyAuthType ${config.APIKeyAuthType}, store ${config.store.type}\n`,
    );
    return exitCode.ok;
  },
};
