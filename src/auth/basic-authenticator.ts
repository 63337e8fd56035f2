import type { Authenticator } from './authenticator.js';
import { parseBasicCredentials } from './basic-credentials.js';
import type { KeyRing } from './key-ring.js';
import { builtInSecurity } from './swagger-security.js';

export const basicChallenge = 'Basic realm="quotagate", charset="UTF-8"';

/** `APIKeyAuthType: 'basic'`: the username is the API key and the password is empty. */
export function createBasicAuthenticator(keys: KeyRing): Authenticator {
  return {
    scheme: 'basic',
    authenticate(req) {
      const credentials = parseBasicCredentials(req);
      const principal =
        credentials && credentials.password === '' && credentials.username !== ''
          ? keys.lookup(credentials.username)
          : null;
      return principal
        ? { ok: true, principal }
        : { ok: false, reject: 'unauthorized', challenge: basicChallenge };
    },
    documentation: { swaggerSecurity: builtInSecurity.basic },
  };
}
