import type { Authenticator } from './authenticator.js';
import { builtInSecurity } from './swagger-security.js';

/** `APIKeyAuthType: 'none'`: every request is accepted, with no application. */
export function createNoneAuthenticator(): Authenticator {
  return {
    scheme: 'none',
    authenticate: () => ({ ok: true, principal: null }),
    documentation: { swaggerSecurity: builtInSecurity.none },
  };
}
