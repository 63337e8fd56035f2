import type { LoadedConfig } from '../config/load-config.js';
import { schemesNamed } from '../applications/caller-schemes.js';
import type { AuthType, OperationAuth } from '../config/schema.js';
import type { Authenticator } from './authenticator.js';
import { createSchemeAuthenticator, type AuthenticatorContext } from './create-authenticator.js';
import { KeyRing } from './key-ring.js';
import { createSchemeListAuthenticator } from './scheme-list-authenticator.js';

/**
 * The authenticators of a config, built once per load: one per scheme it names anywhere, shared by every
 * operation that names it (one JWKS cache, one key ring, one directory), and one per distinct list.
 */
export interface OperationAuthenticators {
  /** The authenticator of `APIKeyAuthType`, for every operation that names no scheme of its own. */
  readonly fallback: Authenticator;
  /** The authenticator of an operation's `auth`, or the fallback when it has none. */
  of(auth: OperationAuth | undefined): Authenticator;
  /** The authenticators of the schemes, each once: what closing the config closes. */
  readonly schemes: readonly Authenticator[];
  /**
   * The usage path's: every scheme the config uses, as a list (a caller of any API reads its own
   * usage with the credentials it calls with), or the one scheme when that is all there is.
   */
  readonly usage: Authenticator;
}

/**
 * The schemes the usage path takes, `APIKeyAuthType` first: `none` adds nothing, a plugin stands alone
 * (only where it is `APIKeyAuthType`), and of basic and ldap, which read the same credentials, the first.
 */
function usageSchemes(named: ReadonlySet<AuthType>, fallback: AuthType): AuthType[] {
  if (fallback === 'plugin') return [fallback];
  const schemes: AuthType[] = [];
  for (const scheme of named) {
    if (scheme === 'none' || scheme === 'plugin') continue;
    const readsBasic = scheme === 'basic' || scheme === 'ldap';
    if (readsBasic && schemes.some((taken) => taken === 'basic' || taken === 'ldap')) continue;
    schemes.push(scheme);
  }
  return schemes.length > 0 ? schemes : [fallback];
}

/** Of `schemes`, the one that keeps a directory of callers (ldap's `identify`), if any does. */
export const directoryOf = (schemes: readonly Authenticator[]): Authenticator | undefined =>
  schemes.find((scheme) => scheme.identify !== undefined);

/**
 * Builds the authenticator of every scheme the config names (a plugin constructed, a JWK Set fetched).
 * @throws ConfigError as `createSchemeAuthenticator` does.
 */
export async function createOperationAuthenticators(
  loaded: LoadedConfig,
  context: AuthenticatorContext,
): Promise<OperationAuthenticators> {
  const named = schemesNamed(loaded.config);
  const keys =
    named.has('basic') && named.has('apikey')
      ? new KeyRing(loaded.config, loaded.environment, context.applications)
      : undefined;
  const byScheme = new Map<AuthType, Authenticator>();
  for (const scheme of named)
    byScheme.set(scheme, await createSchemeAuthenticator(scheme, loaded, context, keys));
  const fallback = byScheme.get(loaded.config.APIKeyAuthType)!;
  const lists = new Map<string, Authenticator>();
  const of = (auth: OperationAuth | undefined): Authenticator => {
    if (auth === undefined) return fallback;
    if (typeof auth === 'string') return byScheme.get(auth)!;
    if (auth.length === 1) return byScheme.get(auth[0]!)!;
    const key = auth.join('+');
    let list = lists.get(key);
    if (!list) {
      list = createSchemeListAuthenticator(auth.map((scheme) => byScheme.get(scheme)!));
      lists.set(key, list);
    }
    return list;
  };
  return {
    fallback,
    schemes: [...byScheme.values()],
    of,
    usage: of(usageSchemes(named, loaded.config.APIKeyAuthType)),
  };
}
