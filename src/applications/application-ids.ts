import type { ApplicationDirectory } from './application-directory.js';
import { isIdentityScheme, namesIdentities, type AuthSettings } from './caller-schemes.js';
import { longestApplicationId } from '../quota/model.js';

/** The id of the project's own application, which the project keys identify. */
export const projectApplicationId = 'project';

// Any text without control characters: a DN (`uid=alice,ou=people,dc=example,dc=org`) is one.
const dynamicId = new RegExp(`^[^\\u0000-\\u001f\\u007f]{1,${longestApplicationId}}$`, 'u');

/** An application's id as principals carry it, and whether a scheme's directory says who it is. */
export interface NamedApplication {
  readonly id: string;
  /**
   * An identity of ldap, jwt or a plugin (a DN, a token's claim), not an application whose keys the
   * config or the portal holds: ldap's directory tells which caller it stands for.
   */
  readonly byIdentity: boolean;
}

type ApplicationSettings = AuthSettings & {
  applications: ReadonlyArray<{ id: string }>;
};

/**
 * The application `id` names, or null when there is none. With key schemes the applications are those
 * of the config, the project's own and (with `made`) those made through the portal API; with ldap, jwt
 * and plugin they are the directory's identities (DNs, or the identityAttribute), the tokens'
 * application claims, and the callers that authenticate, which nobody can list in advance. When
 * `APIKeyAuthType` is a key scheme and some API names an identity scheme, an id that is no
 * application of the keys is such an identity.
 */
export function applicationOf(
  config: ApplicationSettings,
  id: string,
  made?: Pick<ApplicationDirectory, 'nameOf'>,
): NamedApplication | null {
  const identity = dynamicId.test(id) ? { id, byIdentity: true } : null;
  if (isIdentityScheme(config.APIKeyAuthType)) return identity;
  const keyed = keyedApplication(config, id, made);
  if (keyed !== null) return { id: keyed, byIdentity: false };
  return namesIdentities(config) ? identity : null;
}

/** The id of the application `id` names, spelt as principals carry it, or null (see `applicationOf`). */
export const applicationIdOf = (
  config: ApplicationSettings,
  id: string,
  made?: Pick<ApplicationDirectory, 'nameOf'>,
): string | null => applicationOf(config, id, made)?.id ?? null;

/** The application of the keys `id` names: the project's, one of conf/, or one made through the portal API. */
function keyedApplication(
  config: ApplicationSettings,
  id: string,
  made?: Pick<ApplicationDirectory, 'nameOf'>,
): string | null {
  if (id === projectApplicationId) return id;
  const declared = config.applications.find((app) => app.id.toLowerCase() === id.toLowerCase())?.id;
  if (declared) return declared;
  return made?.nameOf(id) !== undefined ? id.toLowerCase() : null;
}
