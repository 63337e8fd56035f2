import type { Environment } from '../config/cross-field-rules.js';
import { ConfigError } from '../config/config-error.js';
import type { Config } from '../config/schema.js';
import type { Authenticator } from './authenticator.js';
import { createBasicAuthenticator } from './basic-authenticator.js';
import { KeyRing } from './key-ring.js';
import { createNoneAuthenticator } from './none-authenticator.js';

/** The authenticator of `APIKeyAuthType`, built once at startup. */
export function createAuthenticator(config: Readonly<Config>, environment: Environment): Authenticator {
  switch (config.APIKeyAuthType) {
    case 'none':
      return createNoneAuthenticator();
    case 'basic':
      return createBasicAuthenticator(new KeyRing(config, environment));
    default:
      throw new ConfigError([
        `APIKeyAuthType: '${config.APIKeyAuthType}' is not available in this build yet (use 'basic' or 'none')`,
      ]);
  }
}
