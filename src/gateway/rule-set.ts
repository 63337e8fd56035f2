import type { Authenticator } from '../auth/authenticator.js';
import type { AuthenticatorContext } from '../auth/create-authenticator.js';
import { createOperationAuthenticators, directoryOf } from '../auth/operation-authenticators.js';
import { compileCatalog, type Router } from '../catalog/router.js';
import { ApplicationNames } from '../config/application-names.js';
import type { LoadedConfig } from '../config/load-config.js';
import type { Logger } from '../observe/log.js';
import {
  credentialFields,
  forwardedFields,
  gatewaySetFields,
  peerIdentityFields,
} from '../kit/gateway-owned-fields.js';
import { hopByHopAndFramingFields } from '../upstream/fields/hop-by-hop.js';
import { TrustedPeers } from '../upstream/fields/trust-proxy.js';
import { CatalogNames, UsagePath } from './usage-endpoint.js';

/**
 * The rules the data plane decides a request by that a reload may change: the catalog, the authenticator
 * (with its keys, directory or plugin) and the header rules. A request keeps the rule set it started
 * on until its response closes, so a reload never changes the rules in the middle of a request; a
 * replaced rule set closes its authenticator once its last request has closed.
 */
export class RuleSet {
  /** Request fields that never go upstream as the client sent them, besides the hop-by-hop ones. */
  readonly dropped: Record<'trusted' | 'untrusted', ReadonlySet<string>>;
  /** Fields the gateway sets, drops or frames by: their underscore spellings never go upstream. */
  readonly owned: ReadonlySet<string>;
  private inFlight = 0;
  private retired = false;
  private closed: Promise<void> | null = null;

  constructor(
    /** The catalog, each operation's authenticator compiled on its route. */
    readonly router: Router<Authenticator>,
    /** The authenticator of `APIKeyAuthType`: the control plane documents it, and asks its directory. */
    readonly authenticator: Authenticator,
    readonly trustedPeers: TrustedPeers,
    /** The names the access log gives the applications. */
    readonly applications: ApplicationNames,
    /** One of every this many access lines of 429 answers is written. */
    readonly sample429: number,
    /** Where callers read their own usage; null when `usagePath` is false. */
    readonly usage: UsagePath | null,
    /** The catalog's names of the APIs and methods restrictions name, for that answer. */
    readonly catalogNames: CatalogNames,
    forwardCredentials: boolean,
    private readonly logger: Logger,
    /** The fields the scheme sets from what it verified (jwt forwardClaims): a client's are dropped. */
    schemeFields: readonly string[] = [],
    /** Every authenticator the rule set's operations use, each once: what `close` closes. */
    private readonly authenticators: readonly Authenticator[] = [authenticator],
    /** The usage path's: every scheme in use (see `OperationAuthenticators.usage`). */
    readonly usageAuthenticator: Authenticator = authenticator,
  ) {
    // The gateway answers `Expect: 100-continue` itself, once the request is admitted; the upstream must
    // not answer it again. Host, X-Forwarded-* and X-Request-Id are the gateway's to set.
    const always = [
      ...gatewaySetFields,
      'host',
      ...forwardedFields,
      ...(forwardCredentials ? [] : credentialFields),
      ...schemeFields.map((name) => name.toLowerCase()),
    ];
    this.dropped = { trusted: new Set(always), untrusted: new Set([...always, ...peerIdentityFields]) };
    this.owned = new Set([...this.dropped.untrusted, ...hopByHopAndFramingFields]);
  }

  /**
   * Builds the rule set of a config: the authenticator as `start` builds it (an auth plugin loaded
   * and constructed).
   * @throws ConfigError when the plugin cannot be loaded or constructed, or `usagePath` is a catalog path.
   */
  static async build(loaded: LoadedConfig, context: AuthenticatorContext): Promise<RuleSet> {
    const { config } = loaded;
    const authenticators = await createOperationAuthenticators(loaded, context);
    // Compiled once per load: a request reads its operation's authenticator off its route.
    const router = compileCatalog(config.apis, (api, method) => authenticators.of(method?.auth ?? api.auth));
    const usage = UsagePath.of(config.usagePath, router);
    const usesJwt = authenticators.schemes.some((authenticator) => authenticator.scheme === 'jwt');
    return new RuleSet(
      router,
      authenticators.fallback,
      new TrustedPeers(config.trustProxy),
      new ApplicationNames(config.applications, context.applications),
      config.accessLog.sample429,
      usage,
      new CatalogNames(config.apis),
      config.forwardCredentials,
      context.logger,
      usesJwt ? Object.values(config.jwt?.forwardClaims ?? {}) : [],
      authenticators.schemes,
      authenticators.usage,
    );
  }

  /**
   * The scheme that tells what a name given to the admin listener stands for (ldap, where the config
   * names it: at the top level or for one API only); undefined when no scheme keeps a directory.
   */
  get directory(): Authenticator | undefined {
    return directoryOf(this.authenticators);
  }

  /** A request starts on this rule set. */
  enter(): void {
    this.inFlight += 1;
  }

  /** A request that started on this rule set has closed. */
  leave(): void {
    this.inFlight -= 1;
    if (this.retired && this.inFlight === 0) this.close();
  }

  /** A reload replaced this rule set: it closes once its requests have. */
  retire(): void {
    this.retired = true;
    if (this.inFlight === 0) this.close();
  }

  /** Closes the authenticators (an LDAP connection pool, a plugin's resources), once. */
  close(): Promise<void> {
    this.closed ??= Promise.all(
      this.authenticators.map((authenticator) =>
        (authenticator.close?.() ?? Promise.resolve()).catch((error: unknown) => {
          this.logger.warn({ err: error }, 'closing an authenticator failed');
        }),
      ),
    ).then(() => undefined);
    return this.closed;
  }
}
