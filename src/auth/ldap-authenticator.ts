import { Client, InvalidCredentialsError, SizeLimitExceededError } from 'ldapts';
import type { Config } from '../config/schema.js';
import { beforeDeadline, deadlinePassed } from '../deadline.js';
import type { Logger } from '../log.js';
import type { Authenticator, AuthResult, Principal } from './authenticator.js';
import { basicChallenge } from './basic-authenticator.js';
import { parseBasicCredentials } from './basic-credentials.js';
import { fillFilter } from './ldap-filter.js';
import { CredentialCache } from './credential-cache.js';
import { builtInSecurity } from './swagger-security.js';

type LdapSettings = NonNullable<Config['ldap']>;

export interface LdapAuthenticatorOptions {
  logger: Logger;
  /** Clock of the session cache, in milliseconds. */
  now?: () => number;
}

const unauthorized: AuthResult = { ok: false, reject: 'unauthorized', challenge: basicChallenge };
const unavailable: AuthResult = { ok: false, reject: 'service_unavailable' };

/**
 * `APIKeyAuthType: 'ldap'`: HTTP basic credentials checked against a directory. Search as the admin (or
 * anonymously), exactly one entry, then bind as that entry with the given password. Any failure to get
 * an answer is 503 within `ldap.timeout`: never an accept, never a hang.
 */
export function createLdapAuthenticator(
  settings: LdapSettings,
  options: LdapAuthenticatorOptions,
): Authenticator {
  // The seed's `cache: true`: at most 100 sessions, for five minutes each.
  const cache = settings.cache
    ? new CredentialCache<Principal>({
        max: 100,
        ttlMs: 5 * 60_000,
        ...(options.now ? { now: options.now } : {}),
      })
    : null;
  const logger = options.logger;

  async function lookUp(username: string, password: string): Promise<Principal | null> {
    const client = new Client({
      url: settings.url,
      timeout: settings.timeout,
      connectTimeout: settings.timeout,
      // ldapts speaks TLS from the first byte whenever it is given tlsOptions, even on ldap://: give them
      // only to ldaps://, and to the StartTLS upgrade otherwise.
      ...(settings.tlsOptions && settings.url.startsWith('ldaps:')
        ? { tlsOptions: { ...settings.tlsOptions } }
        : {}),
    });
    try {
      // startTLS writes the plain socket into the options it is given: hand it a fresh copy every time.
      if (settings.startTLS) await client.startTLS({ ...settings.tlsOptions });
      if (settings.adminPassword) await client.bind(settings.adminDn, settings.adminPassword);
      const dn = await findUser(client, username);
      if (!dn) return null;
      const groups = await groupsOf(client, dn, username);
      return (await bindsAs(client, dn, password))
        ? { subject: username, application: username, ...(groups ? { groups } : {}) }
        : null;
    } finally {
      await client.unbind().catch(() => undefined);
    }
  }

  /** The DN of the one entry the filter finds for `username`, or null for none or several. */
  async function findUser(client: Client, username: string): Promise<string | null> {
    try {
      const { searchEntries } = await client.search(settings.searchBase, {
        scope: 'sub',
        filter: fillFilter(settings.searchFilter, { username }),
        attributes: ['dn'],
        sizeLimit: 2,
      });
      return searchEntries.length === 1 ? searchEntries[0]!.dn : null;
    } catch (error) {
      if (error instanceof SizeLimitExceededError) return null;
      throw error;
    }
  }

  async function bindsAs(client: Client, dn: string, password: string): Promise<boolean> {
    try {
      await client.bind(dn, password);
      return true;
    } catch (error) {
      if (error instanceof InvalidCredentialsError) return false;
      throw error;
    }
  }

  async function groupsOf(client: Client, dn: string, username: string): Promise<string[] | undefined> {
    if (!settings.groupSearchBase || !settings.groupSearchFilter) return undefined;
    const { searchEntries } = await client.search(settings.groupSearchBase, {
      scope: 'sub',
      filter: fillFilter(settings.groupSearchFilter, { dn, username }),
      attributes: ['dn'],
    });
    return searchEntries.map((entry) => entry.dn);
  }

  return {
    scheme: 'ldap',
    async authenticate(req) {
      const credentials = parseBasicCredentials(req);
      // An empty password would make the bind anonymous, which many directories accept.
      if (!credentials || credentials.username === '' || credentials.password === '') return unauthorized;
      const { username, password } = credentials;
      const cached = cache?.get(username, password);
      if (cached) return { ok: true, principal: cached };
      try {
        const principal = await beforeDeadline(lookUp(username, password), settings.timeout);
        if (principal === deadlinePassed) {
          logger.warn({ timeout: settings.timeout }, 'ldap directory did not answer in time');
          return unavailable;
        }
        if (!principal) return unauthorized;
        cache?.set(username, password, principal);
        return { ok: true, principal };
      } catch (error) {
        const { name, message, code } = error as NodeJS.ErrnoException;
        logger.warn({ err: { name, message, code } }, 'ldap directory did not answer');
        return unavailable;
      }
    },
    documentation: { swaggerSecurity: builtInSecurity.ldap },
  };
}
