import { admitted, type AuthResult, type Authenticator } from './authenticator.js';
import { parseBasicCredentials } from './basic-credentials.js';
import type { KeyRing } from './key-ring.js';
import { basicChallenge } from './challenges.js';
import { builtInSecurity } from './swagger-security.js';

const refused: AuthResult = Object.freeze({ ok: false, reject: 'unauthorized', challenge: basicChallenge });

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
      const principal =
        typeof authorization === 'string' ? keys.lookupCredential(authorization, keyOf) : null;
      return principal ? admitted(principal) : refused;
    },
    documentation: { swaggerSecurity: builtInSecurity.basic },
  };
}
