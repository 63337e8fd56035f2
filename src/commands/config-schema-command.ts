import { configJsonSchema } from '../config/json-schema.js';
import { exitCode, parseOptions, type Command } from './command.js';
import { configKeyTable } from './config-key-table.js';

export const configSchemaCommand: Command = {
  summary: 'print the JSON Schema of the config, for editors',
  help: `Usage: gateway config-schema [--markdown]

Prints the JSON Schema (draft 2020-12) of conf/default.(js|yaml), generated from the schema the gateway
validates its config with: every key with its type, default and allowed values. Point an editor at
it (for YAML: a first line \`# yaml-language-server: $schema=./config.schema.json\`). The rules across
keys are not in it: gateway check-config checks those. --markdown prints every key with its type and
default as a Markdown table instead (the one docs/configuration.md shows).

Exit codes: 0.`,
  async run(argv) {
    const { values } = parseOptions(argv, { markdown: { type: 'boolean', default: false } });
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    process.stdout.write(
      values.markdown ? `${configKeyTable()}\n` : `${JSON.stringify(configJsonSchema(), null, 2)}\n`,
    );
    return exitCode.ok;
  },
};
