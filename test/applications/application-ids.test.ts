import { describe, expect, it } from 'vitest';
import { applicationOf } from '../../src/applications/application-ids.js';

const apis = (auth?: string) => [{ methods: [{}], ...(auth === undefined ? {} : { auth }) }];
const config = (APIKeyAuthType: string, auth?: string) =>
  ({ APIKeyAuthType, apis: apis(auth), applications: [{ id: 'Partner' }] }) as Parameters<
    typeof applicationOf
  >[0];

describe('applicationOf', () => {
  it('gives the declared application of a key scheme, spelt as conf/ spells it, and no identity', () => {
    expect(applicationOf(config('basic'), 'partner')).toEqual({ id: 'Partner', byIdentity: false });
    expect(applicationOf(config('basic'), 'project')).toEqual({ id: 'project', byIdentity: false });
    expect(applicationOf(config('basic'), 'uid=bob,ou=people')).toBeNull();
  });

  it('takes any name as an identity when the top-level scheme is ldap, jwt or a plugin', () => {
    for (const scheme of ['ldap', 'jwt', 'plugin'])
      expect(applicationOf(config(scheme), 'uid=bob,ou=people'), scheme).toEqual({
        id: 'uid=bob,ou=people',
        byIdentity: true,
      });
    expect(applicationOf(config('ldap'), 'bad\u0000name')).toBeNull();
  });

  it('takes a name that is no application of the keys as an identity when only an API names ldap or jwt', () => {
    for (const scheme of ['ldap', 'jwt']) {
      expect(applicationOf(config('basic', scheme), 'Bob'), scheme).toEqual({ id: 'Bob', byIdentity: true });
      expect(applicationOf(config('basic', scheme), 'partner'), scheme).toEqual({
        id: 'Partner',
        byIdentity: false,
      });
    }
    expect(applicationOf(config('basic', 'none'), 'Bob')).toBeNull();
  });
});
