import { TLSSocket } from 'node:tls';
import { admitted, type AuthResult, type Authenticator } from './authenticator.js';
import type { KeyRing } from './key-ring.js';
import { builtInSecurity } from './swagger-security.js';

const refused: AuthResult = Object.freeze({ ok: false, reject: 'unauthorized' });

/**
 * `APIKeyAuthType: 'apikey'`: the key travels in the `APIKey` header, over HTTPS only. A key that arrives
 * on a plain-HTTP listener has been exposed already: it is refused, and never forwarded.
 */
export function createApiKeyAuthenticator(keys: KeyRing): Authenticator {
  return {
    scheme: 'apikey',
    authenticate(req) {
      const values = req.headersDistinct.apikey;
      const principal =
        req.socket instanceof TLSSocket && values?.length === 1 && values[0] ? keys.lookup(values[0]) : null;
      return principal ? admitted(principal) : refused;
    },
    documentation: { swaggerSecurity: builtInSecurity.apikey },
  };
}
