import {
  Client,
  InvalidCredentialsError,
  InvalidDNSyntaxError,
  NoSuchObjectError,
  SizeLimitExceededError,
  type Entry,
} from 'ldapts';
import type { Attributes } from '@opentelemetry/api';
import type { Config } from '../config/schema.js';
import { beforeDeadline, deadlinePassed } from '../kit/deadline.js';
import type { Logger } from '../observe/log.js';
import { markFailed, serverOf, startClientSpan, type AuthTracing } from './auth-tracing.js';
import type {
  Authenticator,
  AuthRefusalCause,
  AuthResult,
  Identification,
  Principal,
} from './authenticator.js';
import { basicChallenge } from './challenges.js';
import { parseBasicCredentials } from './basic-credentials.js';
import { fillFilter } from './ldap-filter.js';
import { LdapSessionCache } from './ldap-session-cache.js';
import { builtInSecurity } from './swagger-security.js';

type LdapSettings = NonNullable<Config['ldap']>;

export interface LdapAuthenticatorOptions {
  logger: Logger;
  /** Clock of the session cache, in milliseconds. */
  now?: () => number;
}

/** The refusal of credentials, with why for the authentication span. */
const unauthorized = (cause: AuthRefusalCause): AuthResult =>
  Object.freeze({ ok: false, reject: 'unauthorized', challenge: basicChallenge, cause });
const refusals = {
  no_credentials: unauthorized('no_credentials'),
  unknown_user: unauthorized('unknown_user'),
  bad_password: unauthorized('bad_password'),
  no_identity: unauthorized('no_identity'),
} as const;
const unavailable: AuthResult = { ok: false, reject: 'service_unavailable' };

/** The one entry a username found: its DN, and its identity (or why it has none). */
interface FoundEntry {
  dn: string;
  identity: string | { problem: string };
}

/** What a check with the directory concluded: the principal, or why not. */
type Verdict = { principal: Principal; dn: string } | 'unknown_user' | 'bad_password' | 'no_identity';

/** An operation with the directory, as its client span names it (`ldap bind`). */
type Operation = 'starttls' | 'bind' | 'search';

/**
 * `APIKeyAuthType: 'ldap'`: HTTP basic credentials checked against a directory. Search as the admin (or
 * anonymously), exactly one entry, then bind as that entry with the given password. Any failure to get
 * an answer is 503 within `ldap.timeout`: never an accept, never a hang.
 *
 * The principal (subject and application) is the entry as the directory names it: its DN, or the one
 * value of `identityAttribute`; never the username as typed, since the directory matches many spellings
 * (`alice`, `ALICE`, ` alice`) to one entry and each would otherwise count against quotas of its own.
 */
export function createLdapAuthenticator(
  settings: LdapSettings,
  options: LdapAuthenticatorOptions,
): Authenticator {
  // The seed's `cache: true`: at most 100 sessions, for five minutes each; one session per entry, so
  // up to ten spellings per session are remembered on the way to it.
  const cache = settings.cache
    ? new LdapSessionCache<Principal>({
        maxSessions: 100,
        maxSpellings: 1_000,
        ttlMs: 5 * 60_000,
        ...(options.now ? { now: options.now } : {}),
      })
    : null;
  const { identityAttribute } = settings;
  const logger = options.logger;
  // OpenTelemetry has no conventions for LDAP: a client span of one has the general ones.
  let server: Attributes | null = null;

  /**
   * `work`, one operation with the directory, in a client span under the authentication span when it
   * is traced (`as`: whose bind, or what a search looks for). Its result code says how it ended.
   */
  async function operation<T>(
    tracing: AuthTracing | undefined,
    name: Operation,
    as: string,
    work: () => Promise<T>,
  ): Promise<T> {
    if (!tracing) return work();
    server ??= { ...serverOf(settings.url, settings.url.startsWith('ldaps:') ? 636 : 389) };
    const span = startClientSpan(tracing, `ldap ${name}`, {
      ...server,
      'network.protocol.name': 'ldap',
      'quotagate.ldap.operation': name,
      [name === 'bind' ? 'quotagate.ldap.bind' : 'quotagate.ldap.search']: as,
    });
    try {
      const result = await work();
      span.setAttribute('quotagate.ldap.result_code', 0);
      return result;
    } catch (error) {
      // ldapts's errors of a result carry its code (49: invalid credentials); others are the network's.
      const { code, name: errorName } = error as { code?: unknown; name?: unknown };
      if (typeof code === 'number') span.setAttribute('quotagate.ldap.result_code', code);
      markFailed(span, typeof errorName === 'string' ? errorName : 'Error');
      throw error;
    } finally {
      span.end();
    }
  }

  /** Runs `work` on a connection bound as the admin (or anonymous), and unbinds it whatever happens. */
  async function withDirectory<T>(work: (client: Client) => Promise<T>, tracing?: AuthTracing): Promise<T> {
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
      if (settings.startTLS)
        await operation(tracing, 'starttls', 'tls', () => client.startTLS({ ...settings.tlsOptions }));
      if (settings.adminPassword)
        await operation(tracing, 'bind', 'service', () =>
          client.bind(settings.adminDn, settings.adminPassword!),
        );
      return await work(client);
    } finally {
      await client.unbind().catch(() => undefined);
    }
  }

  function lookUp(username: string, password: string, tracing?: AuthTracing): Promise<Verdict> {
    return withDirectory(async (client) => {
      const entry = await findUser(client, username, tracing);
      if (!entry) return 'unknown_user';
      const { dn, identity } = entry;
      // Groups are searched before the bind as the user, with the rights of the admin (or anonymous).
      const groups = typeof identity === 'string' ? await groupsOf(client, dn, identity, tracing) : undefined;
      if (!(await bindsAs(client, dn, password, tracing))) return 'bad_password';
      // Said only once the password is right, so that guessed usernames cannot fill the log.
      if (typeof identity !== 'string') {
        logger.warn({ dn, identityAttribute }, `ldap entry refused: ${identity.problem}`);
        return 'no_identity';
      }
      return { dn, principal: { subject: identity, application: identity, ...(groups ? { groups } : {}) } };
    }, tracing);
  }

  /**
   * The identity of the entry `name` stands for: the DN of an entry under `searchBase`, or a name the
   * entry logs in with (found as at login). Either way the identity is the directory's spelling, the
   * one principals carry, so `bob`, `BOB` and `uid=bob,ou=people,…` all name bob's one quota.
   */
  async function identify(name: string): Promise<Identification> {
    try {
      const found = await beforeDeadline(
        withDirectory(async (client) => (await entryAt(client, name)) ?? (await findUser(client, name))),
        settings.timeout,
      );
      if (found === deadlinePassed) return 'unavailable';
      if (!found)
        return {
          unknown: `no entry of the directory is named '${name}': name an LDAP caller by the name it logs in with, or by its DN under ${settings.searchBase}`,
        };
      if (typeof found.identity !== 'string')
        return {
          unknown: `the directory entry '${found.dn}' can never be a caller: ${found.identity.problem}`,
        };
      return { identity: found.identity };
    } catch (error) {
      const { name: errorName, message, code } = error as NodeJS.ErrnoException;
      logger.warn({ err: { name: errorName, message, code } }, 'ldap directory did not answer');
      return 'unavailable';
    }
  }

  /** The entry whose DN is `name`, when it is a DN under `searchBase` (where logins are searched). */
  async function entryAt(client: Client, name: string): Promise<FoundEntry | null> {
    if (!name.includes('=') || !underSearchBase(name)) return null;
    try {
      const { searchEntries } = await client.search(name, {
        scope: 'base',
        filter: '(objectClass=*)',
        attributes: identityAttribute ? [identityAttribute] : ['dn'],
      });
      const entry = searchEntries[0];
      if (!entry) return null;
      return { dn: entry.dn, identity: identityAttribute ? identityOf(entry) : entry.dn };
    } catch (error) {
      if (error instanceof NoSuchObjectError || error instanceof InvalidDNSyntaxError) return null;
      throw error;
    }
  }

  /** Whether the DN `name` lies under `searchBase`, compared as LDAP does: without case or spaces at , and =. */
  function underSearchBase(name: string): boolean {
    const key = (dn: string) =>
      dn
        .toLowerCase()
        .replace(/\s*([,=])\s*/g, '$1')
        .trim();
    const base = key(settings.searchBase);
    const dn = key(name);
    return dn !== base && dn.endsWith(`,${base}`);
  }

  /** The one entry the filter finds for `username`, or null for none or several. */
  async function findUser(
    client: Client,
    username: string,
    tracing?: AuthTracing,
  ): Promise<FoundEntry | null> {
    try {
      const { searchEntries } = await operation(tracing, 'search', 'user', () =>
        client.search(settings.searchBase, {
          scope: 'sub',
          filter: fillFilter(settings.searchFilter, { username }),
          attributes: identityAttribute ? [identityAttribute] : ['dn'],
          sizeLimit: 2,
        }),
      );
      if (searchEntries.length !== 1) return null;
      const entry = searchEntries[0]!;
      return { dn: entry.dn, identity: identityAttribute ? identityOf(entry) : entry.dn };
    } catch (error) {
      if (error instanceof SizeLimitExceededError) return null;
      throw error;
    }
  }

  /**
   * The one value of `identityAttribute` in `entry`, as the directory spells it. Only that attribute was
   * asked for, so every attribute that came back counts: the directory may name it by an alias (`userid`
   * for `uid`), or return the subtypes of a supertype (`cn` and `sn` for `name`). ldapts lists an
   * attribute the entry lacks as `[]`.
   */
  function identityOf(entry: Entry): string | { problem: string } {
    const values = Object.entries(entry).flatMap(([name, value]) =>
      name === 'dn' ? [] : Array.isArray(value) ? value : [value],
    );
    if (values.length === 0) return { problem: 'it has no identityAttribute' };
    if (values.length > 1) return { problem: 'it has several values of identityAttribute' };
    const [value] = values;
    return typeof value === 'string' && value !== ''
      ? value
      : { problem: 'its identityAttribute is empty or not text' };
  }

  async function bindsAs(
    client: Client,
    dn: string,
    password: string,
    tracing?: AuthTracing,
  ): Promise<boolean> {
    try {
      await operation(tracing, 'bind', 'user', () => client.bind(dn, password));
      return true;
    } catch (error) {
      if (error instanceof InvalidCredentialsError) return false;
      throw error;
    }
  }

  /**
   * The DNs of the groups of the entry. `{{username}}` of the group filter is the identity, not the name
   * as typed, so that every spelling gets the same groups; the config allows it only with
   * identityAttribute.
   */
  async function groupsOf(
    client: Client,
    dn: string,
    identity: string,
    tracing?: AuthTracing,
  ): Promise<string[] | undefined> {
    const { groupSearchBase, groupSearchFilter } = settings;
    if (!groupSearchBase || !groupSearchFilter) return undefined;
    const { searchEntries } = await operation(tracing, 'search', 'groups', () =>
      client.search(groupSearchBase, {
        scope: 'sub',
        filter: fillFilter(groupSearchFilter, { dn, username: identity }),
        attributes: ['dn'],
      }),
    );
    return searchEntries.map((entry) => entry.dn);
  }

  return {
    scheme: 'ldap',
    async authenticate(req, _res, _path, tracing) {
      const header = req.headers.authorization;
      const credentials = typeof header === 'string' ? parseBasicCredentials(header) : null;
      // An empty password would make the bind anonymous, which many directories accept.
      if (!credentials || credentials.username === '' || credentials.password === '')
        return refusals.no_credentials;
      const { username, password } = credentials;
      const cached = cache?.get(username, password);
      if (cache) tracing?.span.setAttribute('quotagate.auth.cached', cached !== undefined);
      if (cached) return { ok: true, principal: cached };
      try {
        const verdict = await beforeDeadline(lookUp(username, password, tracing), settings.timeout);
        if (verdict === deadlinePassed) {
          logger.warn({ timeout: settings.timeout }, 'ldap directory did not answer in time');
          return unavailable;
        }
        if (typeof verdict === 'string') return refusals[verdict];
        cache?.set(username, verdict.dn, password, verdict.principal);
        return { ok: true, principal: verdict.principal };
      } catch (error) {
        const { name, message, code } = error as NodeJS.ErrnoException;
        logger.warn({ err: { name, message, code } }, 'ldap directory did not answer');
        return unavailable;
      }
    },
    identify,
    documentation: { swaggerSecurity: builtInSecurity.ldap },
  };
}
