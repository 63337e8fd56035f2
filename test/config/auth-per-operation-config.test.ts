import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { petsConfig, writeConfigDir } from '../helpers/test-gateway.js';
import { badConfig, problemsOf } from '../helpers/config-problems.js';

// One fixture per rule of `apis[].auth` and `apis[].methods[].auth`: each changes the valid base.mjs once.
const rules: Array<[string, string]> = [
  [
    'auth-per-api-jwt-unconfigured',
    "apis[0].auth: names 'jwt', which needs the top-level jwt settings (issuer, audience, jwksUri or secret)",
  ],
  [
    'auth-per-method-ldap-unconfigured',
    "apis[0].methods[1].auth: names 'ldap', which needs the top-level ldap settings",
  ],
  [
    'auth-per-api-apikey-without-tls',
    "apis[1].auth: names 'apikey', which needs tls (keys travel over HTTPS only)",
  ],
  [
    'auth-per-api-key-missing',
    "apikey_development: required when apis[0].auth is 'basic': set it, or set APIKEY_DEVELOPMENT where the config reads it from the environment (as the shipped conf/default.js does); `gateway start --demo` makes one up for its run",
  ],
  ['auth-per-api-unknown', 'apis[1].auth: must be one of none, basic, apikey, ldap, plugin, jwt'],
  [
    'auth-list-misspelt',
    "apis[0].auth: 'basik' must be one of none, basic, apikey, ldap, plugin, jwt (did you mean basic?)",
  ],
  ['auth-list-empty', 'apis[0].auth: must name at least one scheme'],
  ['auth-list-twice', 'apis[0].auth: names a scheme twice'],
  [
    'auth-list-basic-and-ldap',
    "apis[0].auth: may not list both 'basic' and 'ldap': both read Basic credentials, so a request could not say which it means",
  ],
  [
    'auth-list-with-none',
    "apis[0].auth: may not list 'none': a public operation takes no credentials, so say auth: 'none' alone",
  ],
  [
    'auth-list-with-plugin',
    "apis[0].auth: may not list 'plugin' with other schemes: the plugin reads whatever credentials it likes, so it stands alone",
  ],
];

describe('loadConfig: the scheme of an API or a method', () => {
  it.each(rules)('rejects %s with the file, the key path and the reason', async (name, message) => {
    expect(await problemsOf(badConfig(name))).toContain(`${badConfig(name)}/default.mjs: ${message}`);
  });

  it('names every mistake of every auth in one pass', async () => {
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9/pets', {
        apis: [
          {
            id: '5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10',
            name: 'Pets',
            basePath: '/pets',
            upstream: 'http://127.0.0.1:9/pets',
            auth: 'jwt',
            methods: [
              {
                id: 'c4d2a9e3-71b8-4c6f-9e0d-2a5b8f1c3d32',
                name: 'a',
                verb: 'GET',
                path: '/a',
                auth: ['none', 'basic'],
              },
            ],
          },
        ],
      }),
    );
    const problems = (await problemsOf(dir)).map((problem) => problem.slice(problem.indexOf(': ') + 2));
    expect(problems).toEqual([
      "apis[0].auth: names 'jwt', which needs the top-level jwt settings (issuer, audience, jwksUri or secret)",
      "apis[0].methods[0].auth: may not list 'none': a public operation takes no credentials, so say auth: 'none' alone",
    ]);
  });

  it("reads the top-level keys a plugin declares when an API names 'plugin' under another scheme", async () => {
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9/pets', {
        APIKeyAuthPlugin: './test/fixtures/plugins/quoting-plugin.js',
        secret: 'the plugin reads this',
        apis: [
          {
            id: '5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10',
            name: 'Pets',
            basePath: '/pets',
            upstream: 'http://127.0.0.1:9/pets',
            auth: 'plugin',
          },
        ],
      }),
    );
    const loaded = await loadConfig({ configDir: dir, env: {} });
    expect(loaded.extras).toEqual({ secret: 'the plugin reads this' });
    expect(loaded.config.apis[0]!.auth).toBe('plugin');
  });
});
