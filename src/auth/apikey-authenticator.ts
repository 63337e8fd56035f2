import type { TLSSocket } from 'node:tls';
import { admitted, type AuthResult, type Authenticator } from './authenticator.js';
import type { KeyRing } from './key-ring.js';
import { builtInSecurity } from './swagger-security.js';

const noKey: AuthResult = Object.freeze({ ok: false, reject: 'unauthorized', cause: 'no_credentials' });
const unknownKey: AuthResult = Object.freeze({ ok: false, reject: 'unauthorized', cause: 'unknown_key' });
const overPlainHttp: AuthResult = Object.freeze({
  ok: false,
  reject: 'unauthorized',
  reason: 'https_required',
});

/**
 * `APIKeyAuthType: 'apikey'`: the key travels in the `APIKey` header, over HTTPS only. A key that arrives
 * on a plain-HTTP listener has been exposed already: it is refused, and never forwarded. Nothing can be
 * admitted there, so every request on it is told so, with or without a key.
 */
export function createApiKeyAuthenticator(keys: KeyRing): Authenticator {
  return {
    scheme: 'apikey',
    authenticate(req) {
      // An HTTP/2 stream's socket stands for its connection's: `encrypted` is the connection's.
      if ((req.socket as Partial<TLSSocket>).encrypted !== true) return overPlainHttp;
      const values = req.headersDistinct.apikey;
      if (values?.length !== 1 || !values[0]) return noKey;
      const principal = keys.lookup(values[0]);
      return principal ? admitted(principal) : unknownKey;
    },
    documentation: { swaggerSecurity: builtInSecurity.apikey },
  };
}
