import type { ApplicationDirectory } from './application-directory.js';
import { longestApplicationId } from '../quota/model.js';

/** The id of the project's own application, which the project keys identify. */
export const projectApplicationId = 'project';

// Any text without control characters: a DN (`uid=alice,ou=people,dc=example,dc=org`) is one.
const dynamicId = new RegExp(`^[^\\u0000-\\u001f\\u007f]{1,${longestApplicationId}}$`, 'u');

/**
 * The id of the application `id` names, spelt as principals carry it, or null when there is none.
 * With key schemes the applications are those of the config, the project's own and (with `made`) those
 * made through the portal API; with ldap, jwt and
 * plugin they are the directory's identities (DNs, or the identityAttribute), the tokens' application
 * claims, and the callers that authenticate, which nobody can list in advance.
 */
export function applicationIdOf(
  config: { APIKeyAuthType: string; applications: ReadonlyArray<{ id: string }> },
  id: string,
  made?: Pick<ApplicationDirectory, 'nameOf'>,
): string | null {
  if (['ldap', 'jwt', 'plugin'].includes(config.APIKeyAuthType)) return dynamicId.test(id) ? id : null;
  if (id === projectApplicationId) return id;
  const declared = config.applications.find((app) => app.id.toLowerCase() === id.toLowerCase())?.id;
  if (declared) return declared;
  return made?.nameOf(id) !== undefined ? id.toLowerCase() : null;
}
