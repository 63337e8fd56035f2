import type { AuthDocumentation } from './authenticator.js';

type SwaggerSecurity = ReturnType<AuthDocumentation['swaggerSecurity']>;

const named = (name: string, definition: Record<string, unknown>): SwaggerSecurity => ({
  securityDefinitions: { [name]: definition },
  security: [{ [name]: [] }],
});

/** Swagger 2.0 security of the built-in schemes, as the seed's getSwaggerSecurity returns it for plugins. */
export const builtInSecurity = {
  none: (): SwaggerSecurity => ({ securityDefinitions: {}, security: [] }),
  basic: () =>
    named('basic', { type: 'basic', description: 'HTTP basic: the API key as username, an empty password' }),
  apikey: () =>
    named('apikey', {
      type: 'apiKey',
      name: 'APIKey',
      in: 'header',
      description: 'The API key (HTTPS only)',
    }),
  ldap: () => named('ldap', { type: 'basic', description: 'HTTP basic: directory username and password' }),
  // Swagger 2.0 has no bearer type: an apiKey in the Authorization header is its usual spelling.
  jwt: () =>
    named('jwt', {
      type: 'apiKey',
      name: 'Authorization',
      in: 'header',
      description: "A JWT from the identity provider: 'Bearer <token>'",
    }),
};
