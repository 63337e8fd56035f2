import { z } from 'zod';
import { configSchema } from './schema.js';

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
