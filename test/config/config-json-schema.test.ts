import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { configJsonSchema } from '../../src/config/json-schema.js';
import { loadConfig } from '../../src/config/load-config.js';
import { petsConfig } from '../helpers/test-gateway.js';

/**
 * The JSON Schema of the config is generated from the zod schema the loader validates with: a config
 * the loader takes, the JSON Schema takes; a key of the wrong type, it refuses too.
 */
// With the formats the schema names (uuid, uri…) checked, not ignored with a warning each. The package
// is CommonJS: its function is the default export's `default` under NodeNext.
const addFormats = ajvFormats.default;
const validator = addFormats(new Ajv2020({ strict: false, allErrors: true })).compile(configJsonSchema());

describe('gateway config-schema', () => {
  it('accepts what the loader accepts: the test config and the fixtures that load', async () => {
    expect(validator(petsConfig('http://127.0.0.1:9/pets')), JSON.stringify(validator.errors)).toBe(true);
    for (const dir of ['cjs', 'yaml', 'esm-overlay']) {
      const { config } = await loadConfig({ configDir: `test/fixtures/config/${dir}`, env: {} });
      expect(
        validator(JSON.parse(JSON.stringify(config))),
        `${dir}: ${JSON.stringify(validator.errors)}`,
      ).toBe(true);
    }
  });

  it('refuses keys of the wrong type or value, and misspelt nested keys, naming each', () => {
    const bad = { port: 'eighty', APIKeyAuthType: 'token', admin: { prot: 9000 }, store: { type: 'disk' } };
    expect(validator(bad)).toBe(false);
    expect(validator.errors!.map((error) => error.instancePath).sort()).toEqual(
      expect.arrayContaining(['/APIKeyAuthType', '/admin', '/port', '/store/type']),
    );
  });

  it('checks the formats it names: an API id that is not a UUID is refused', () => {
    const config = petsConfig('http://127.0.0.1:9/pets') as { apis: Array<{ id: string }> };
    config.apis[0]!.id = 'not-a-uuid';
    expect(validator(config)).toBe(false);
    expect(validator.errors!.map((error) => `${error.instancePath} ${error.keyword}`)).toContain(
      '/apis/0/id format',
    );
  });
});
