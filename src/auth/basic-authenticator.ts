import { admitted, type AuthRefusalCause, type AuthResult, type Authenticator } from './authenticator.js';
import { parseBasicCredentials } from './basic-credentials.js';
import type { KeyRing } from './key-ring.js';
import { basicChallenge } from './challenges.js';
import { builtInSecurity } from './swagger-security.js';

const refused = (cause: AuthRefusalCause): AuthResult =>
  Object.freeze({ ok: false, reject: 'unauthorized', challenge: basicChallenge, cause });
const noCredentials = refused('no_credentials');
const unknownKey = refused('unknown_key');

/** The key of an Authorization value: the user name of Basic credentials with an empty password. */
function keyOf(authorization: string): string | null {
  const credentials = parseBasicCredentials(authorization);
  return credentials && credentials.password === '' && credentials.username !== ''
    ? credentials.username
    : null;
}

/** `APIKeyAuthType: 'basic'`: the username is the API key and the password is empty. */
export function createBasicAuthenticator(keys: KeyRing): Authenticator {
  return {
    scheme: 'basic',
    authenticate(req) {
      const authorization = req.headers.authorization;
      if (typeof authorization !== 'string') return noCredentials;
      const principal = keys.lookupCredential(authorization, keyOf);
      return principal ? admitted(principal) : unknownKey;
    },
    documentation: { swaggerSecurity: builtInSecurity.basic },
  };
}
