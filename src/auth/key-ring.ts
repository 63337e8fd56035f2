import { createHash, timingSafeEqual } from 'node:crypto';
import { ApplicationDirectory, type KeyEntry } from '../applications/application-directory.js';
import type { Config } from '../config/schema.js';
import { projectApplicationId } from '../applications/application-ids.js';
import type { Environment } from '../applications/application-schema.js';
import type { Principal } from './authenticator.js';

/** Valid spellings of credentials kept (see `lookupCredential`). */
const credentialsKept = 10_000;

const digest = (key: string) => createHash('sha256').update(key, 'utf8').digest();

/**
 * The API keys valid in this environment, each mapped to the principal it identifies: those of the
 * config and those of the applications made through the portal API. Lookups compare fixed-length
 * digests in constant time and visit every key, so timing tells nothing about a key. A key once found
 * is remembered, so its next requests skip the hashing: only valid keys are, so this holds at most one
 * entry per key, and a hit tells a caller nothing the 200 does not; a change of the API's applications
 * forgets them all (a revoked key stops working at once).
 */
export class KeyRing {
  private readonly entries: KeyEntry[];
  private readonly found = new Map<string, Principal>();
  /** Whole credentials (an Authorization value) shown valid before, with the principal of their key. */
  private readonly credentials = new Map<string, Principal>();
  private seenGeneration: number;

  constructor(
    config: Readonly<Config>,
    private readonly environment: Environment,
    private readonly directory: ApplicationDirectory = new ApplicationDirectory(),
  ) {
    this.seenGeneration = directory.generation;
    const keyName = `apikey_${environment}` as const;
    this.entries = [];
    const projectKey = config[keyName];
    if (projectKey) {
      this.entries.push({
        digest: digest(projectKey),
        principal: { subject: projectApplicationId, application: projectApplicationId },
      });
    }
    for (const app of config.applications) {
      const key = app[keyName];
      if (key)
        this.entries.push({ digest: digest(key), principal: { subject: app.id, application: app.id } });
    }
  }

  lookup(candidate: string): Principal | null {
    this.forgetOnChange();
    const known = this.found.get(candidate);
    if (known) return known;
    const candidateDigest = digest(candidate);
    let found: Principal | null = null;
    for (const entry of this.entries) {
      if (timingSafeEqual(entry.digest, candidateDigest)) found = entry.principal;
    }
    for (const entry of this.directory.keysOf(this.environment)) {
      if (timingSafeEqual(entry.digest, candidateDigest)) found = entry.principal;
    }
    if (found) this.found.set(candidate, found);
    return found;
  }

  /**
   * The principal of a credential as a request spells it whole (an Authorization value), whose key
   * `keyOf` reads from it: a spelling shown valid before skips the parsing and the hashing. Only valid
   * spellings are kept, at most `credentialsKept` (then forgotten together), so a holder of a key cannot
   * grow the memory by spelling it in ever new ways.
   */
  lookupCredential(credential: string, keyOf: (credential: string) => string | null): Principal | null {
    this.forgetOnChange();
    const known = this.credentials.get(credential);
    if (known) return known;
    const key = keyOf(credential);
    const principal = key === null ? null : this.lookup(key);
    if (principal) {
      if (this.credentials.size >= credentialsKept) this.credentials.clear();
      this.credentials.set(credential, principal);
    }
    return principal;
  }

  /** A change of the API's applications forgets every key found: a revoked key stops working at once. */
  private forgetOnChange(): void {
    if (this.seenGeneration === this.directory.generation) return;
    this.found.clear();
    this.credentials.clear();
    this.seenGeneration = this.directory.generation;
  }
}
