import { z } from 'zod';
import { configSchema } from '../config/schema.js';
import { exitCode, parseOptions, type Command } from './command.js';

/**
 * The JSON Schema of conf/default.(js|yaml), generated from the zod schema the loader validates with:
 * types, defaults, allowed values and descriptions, for editors and other tools. The rules across keys
 * (and the plugin's own top-level keys) are the loader's: `gateway check-config` has the last word.
 */
export function configJsonSchema(): Record<string, unknown> {
  return {
    $id: 'https://quotagate.dev/schemas/config.json',
    title: 'quotagate configuration (conf/default.js or conf/default.yaml)',
    ...z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }),
  };
}

export const configSchemaCommand: Command = {
  summary: 'print the JSON Schema of the config, for editors',
  help: `Usage: gateway config-schema

Prints the JSON Schema (draft 2020-12) of conf/default.(js|yaml), generated from the schema the gateway
validates its config with: every key with its type, default and allowed values. Point an editor at
it (for YAML: a first line \`# yaml-language-server: $schema=./config.schema.json\`). The rules across
keys are not in it: gateway check-config checks those.

Exit codes: 0.`,
  async run(argv) {
    const { values } = parseOptions(argv, {});
    if (values.help) {
      process.stdout.write(`${this.help}\n`);
      return exitCode.ok;
    }
    process.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
    return exitCode.ok;
  },
};
