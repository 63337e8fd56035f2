import { describe, expect, it } from 'vitest';
import { problemsOf } from '../helpers/config-problems.js';
import { petsConfig, writeConfigDir } from '../helpers/test-gateway.js';

describe('jwt.jwksUri', () => {
  it('refuses a URL with a user and password, which a fetch would refuse, without showing the password', async () => {
    const password = 'jwks-pw-8d1e0b';
    const problems = await problemsOf(
      writeConfigDir(
        petsConfig('http://127.0.0.1:9', {
          APIKeyAuthType: 'jwt',
          jwt: { jwksUri: `https://idp-user:${password}@idp.example/jwks`, issuer: 'i', audience: 'a' },
        }),
      ),
    );
    expect(problems).toEqual([
      expect.stringContaining(
        'jwt.jwksUri: must not carry credentials: a fetch refuses a user and password in the URL',
      ),
    ]);
    expect(problems.join('\n')).not.toContain(password);
  });
});
