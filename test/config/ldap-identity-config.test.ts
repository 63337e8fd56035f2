import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { petsConfig, writeConfigDir } from '../helpers/test-gateway.js';
import { badConfig, problemsOf } from '../helpers/config-problems.js';

// One fixture per rule of ldap.identityAttribute, each changing the valid base.mjs in one way; the
// rows belong in the table of test/config/load-config.test.ts.
const rules: Array<[string, string]> = [
  [
    'ldap-identity-attribute-invalid',
    "ldap.identityAttribute: must be an attribute name such as uid; leave it out to use the entry's DN",
  ],
  [
    'ldap-identity-attribute-password',
    'ldap.identityAttribute: must not be a password attribute (the identity is written to logs)',
  ],
  [
    'ldap-group-filter-username-without-identity',
    'ldap.groupSearchFilter: {{username}} needs ldap.identityAttribute (the name as the directory spells it), or use {{dn}}',
  ],
];

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function ldapConfigDir(ldap: Record<string, unknown>): string {
  const dir = writeConfigDir(
    petsConfig('http://127.0.0.1:9000', {
      APIKeyAuthType: 'ldap',
      ldap: {
        url: 'ldap://127.0.0.1:389',
        adminDn: 'cn=admin,dc=example,dc=org',
        searchBase: 'dc=example,dc=org',
        searchFilter: '(uid={{username}})',
        ...ldap,
      },
    }),
  );
  dirs.push(dir);
  return dir;
}

describe('loadConfig: ldap.identityAttribute', () => {
  it.each(rules)('rejects %s with the file, the key path and the reason', async (name, message) => {
    expect(await problemsOf(badConfig(name))).toContain(`${badConfig(name)}/default.mjs: ${message}`);
  });

  it.each(['dn', 'DN', '', 'uid,cn', 'mail;'])(
    'rejects identityAttribute %j, which names no attribute',
    async (name) => {
      const dir = ldapConfigDir({ identityAttribute: name });
      expect(await problemsOf(dir)).toEqual([
        `${dir}/default.mjs: ldap.identityAttribute: must be an attribute name such as uid; leave it out to use the entry's DN`,
      ]);
    },
  );

  it.each(['authPassword', 'userPassword;binary', '2.5.4.35'])(
    'rejects the password attribute %j as identityAttribute',
    async (name) => {
      const dir = ldapConfigDir({ identityAttribute: name });
      expect(await problemsOf(dir)).toEqual([
        `${dir}/default.mjs: ldap.identityAttribute: must not be a password attribute (the identity is written to logs)`,
      ]);
    },
  );

  it('accepts identityAttribute by name, OID or with options, and {{username}} in the group filter with it', async () => {
    for (const identityAttribute of ['uid', 'employeeNumber', '0.9.2342.19200300.100.1.1', 'cn;lang-en']) {
      const { config } = await loadConfig({
        configDir: ldapConfigDir({
          identityAttribute,
          groupSearchBase: 'ou=groups,dc=example,dc=org',
          groupSearchFilter: '(memberUid={{username}})',
        }),
        env: {},
      });
      expect(config.ldap?.identityAttribute).toBe(identityAttribute);
    }
  });

  it('leaves identityAttribute out by default: the principal is the DN', async () => {
    const { config } = await loadConfig({ configDir: ldapConfigDir({}), env: {} });
    expect(config.ldap).not.toHaveProperty('identityAttribute');
  });
});
