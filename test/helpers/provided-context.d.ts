import type { LdapFixture } from './slapd-server.js';

// Types the values test/helpers/global-setup.ts hands to `inject()`.
declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    ldap: LdapFixture;
  }
}
