import { describe, expect, it } from 'vitest';
import {
  longestRedactedText,
  secretValues,
  withoutCredentials,
  valueRemover,
  withoutValues,
} from '../../src/kit/secret-redaction.js';

describe('withoutCredentials', () => {
  it.each([
    ['bad header Basic dXNlcjpwYXNzd29yZA==', 'bad header Basic [REDACTED]'],
    ['got Bearer abc.def.ghi', 'got Bearer [REDACTED]'],
    ['password=hunter2 rejected', 'password=[REDACTED] rejected'],
    ['api_key: "k-123456" unknown', 'api_key: "[REDACTED]" unknown'],
    ["the secret 'open-sesame' is wrong", "the secret '[REDACTED]' is wrong"],
    ['X-Secret=abcd1234 refused', 'X-Secret=[REDACTED] refused'],
    ['key Vq3xT9kLm2Pq8Rz4Yw6Nb1Jh was refused', 'key [REDACTED] was refused'],
  ])('redacts %s', (text, expected) => {
    expect(withoutCredentials(text)).toBe(expected);
  });

  it.each([
    'quota 00000000-0000-0000-0000-000000000001 not found',
    'connect ECONNREFUSED 127.0.0.1:6379',
    'cannot read /work/main/node_modules/http-proxy-3/dist/lib/index.js',
    'the token expired',
    'password required',
    'basic authentication failed',
  ])('leaves %s as it is', (text) => {
    expect(withoutCredentials(text)).toBe(text);
  });
});

describe('redaction of client-controlled text', () => {
  // The text a plugin quotes comes from the client. These inputs made the earlier pattern backtrack
  // for tens of seconds on 8 KB; a linear search reads them at once (vitest's timeout guards a hang).
  it.each([
    ['a name run with no value', 'pass-'.repeat(3_000)],
    ['a secret word repeated without separators', 'secrettoken'.repeat(1_500)],
    ['names followed by spaces and no quote', 'password '.repeat(2_000)],
    ['a long opaque run', 'a1'.repeat(8_000)],
  ])('searches %s in linear time and cuts what is too long', (_name, text) => {
    const redacted = withoutCredentials(text);
    expect(redacted.length).toBeLessThanOrEqual(longestRedactedText + '…[truncated]'.length);
  });

  it('takes the longest value out first, so a shorter one that is its prefix leaves nothing behind', () => {
    expect(withoutValues('team pass zzzz-zzzz-and-more', ['zzzz-zzzz', 'zzzz-zzzz-and-more'])).toBe(
      'team pass [REDACTED]',
    );
  });

  it('takes a value out of a text exactly as long as the shortest value, and leaves shorter text alone', () => {
    const remove = valueRemover(['k3y!', 'a-much-longer-secret']);
    expect(remove('k3y!')).toBe('[REDACTED]');
    expect(remove('k3y')).toBe('k3y');
    expect(remove('/pets/k3y!/a-much-longer-secret')).toBe('/pets/[REDACTED]/[REDACTED]');
    expect(valueRemover([])('/pets/1')).toBe('/pets/1');
  });
});

describe('secretValues', () => {
  it('finds the strings under secret-sounding keys at any depth, but not the scheme name', () => {
    expect(
      secretValues({
        APIKeyAuthType: 'basic',
        APIKeyAuthPlugin: './plugin.js',
        apikey_development: 'dev-key',
        ldap: { url: 'ldap://x', adminPassword: 'ldap-pw' },
        admin: { users: [{ username: 'ann', password: 'ann-pw' }] },
        secret: 'shared',
        applications: [{ id: 'a', apikey_production: 'app-key' }],
      }).sort(),
    ).toEqual(['ann-pw', 'app-key', 'dev-key', 'ldap-pw', 'shared']);
  });
});

describe('withoutValues', () => {
  it('replaces every occurrence of each value of at least 4 characters', () => {
    expect(withoutValues('a-b k1 k1 secret.value secret.value', ['k1', 'secret.value'])).toBe(
      'a-b k1 k1 [REDACTED] [REDACTED]',
    );
  });
});
