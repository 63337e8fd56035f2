import type { Environment, StoredApplication } from './application-schema.js';

/** Who a request speaks for, as an authenticator found it: the subject, and the application it counts for. */
export interface Principal {
  subject: string;
  application?: string;
  /** Directory groups (LDAP group entry DNs) of the subject, when the scheme looks them up. */
  groups?: string[];
  /** Request fields the scheme sends upstream for this principal, as name, value pairs (jwt forwardClaims). */
  upstreamFields?: readonly string[];
  /**
   * When the credentials it was found by stop holding (a JWT's exp), in milliseconds on the clock of the
   * scheme that found it; an exchange still open then ends.
   */
  expiresAt?: number;
}

/** Where the applications of the API come from: their repository, or a worker's feed of its primary's. */
export interface ApplicationSource {
  all(): StoredApplication[];
  onChange(listener: (applications: StoredApplication[]) => void): void;
}

/** A key the data plane accepts: the digest it compares, and who it identifies. */
export interface KeyEntry {
  digest: Buffer;
  principal: Principal;
}

/**
 * The applications made through the portal API as the data plane reads them: the digests of the keys
 * that open requests in each environment (enabled keys of enabled applications) and the applications'
 * names, made again on every change. `generation` tells a reader that remembers keys to forget them: a
 * revoked key must stop working at once.
 */
export class ApplicationDirectory {
  generation = 0;
  private keys: Record<Environment, KeyEntry[]> = { development: [], production: [] };
  private names = new Map<string, string>();

  /** Takes the applications of `source` from now on, and every change of them. */
  follow(source: ApplicationSource): void {
    this.refresh(source.all());
    source.onChange((applications) => this.refresh(applications));
  }

  keysOf(environment: Environment): readonly KeyEntry[] {
    return this.keys[environment];
  }

  /** The name of an application of the API, or undefined for another id. */
  nameOf(id: string): string | undefined {
    return this.names.get(id.toLowerCase());
  }

  private refresh(applications: readonly StoredApplication[]): void {
    const keys: Record<Environment, KeyEntry[]> = { development: [], production: [] };
    for (const application of applications) {
      if (!application.enabled) continue;
      const principal = { subject: application.id, application: application.id };
      for (const key of application.keys)
        if (key.enabled) keys[key.environment].push({ digest: Buffer.from(key.digest, 'hex'), principal });
    }
    this.keys = keys;
    this.names = new Map(applications.map((application) => [application.id, application.name]));
    this.generation += 1;
  }
}

/**
 * Applications of conf/ whose id an application made through the portal API has already: both would
 * answer to one id (their keys one principal, their quota one), so the config is refused.
 */
export function sharedIdProblems(
  declared: ReadonlyArray<{ id: string }>,
  made: readonly StoredApplication[],
): string[] {
  const byId = new Map(made.map((application) => [application.id, application]));
  return declared.flatMap((application, i) => {
    const other = byId.get(application.id.toLowerCase());
    return other
      ? [
          `applications[${i}].id: the application '${other.name}' made through the admin API has this id; delete it there, or give this one another id`,
        ]
      : [];
  });
}
