import { createHash, timingSafeEqual } from 'node:crypto';
import type { Config } from '../config/schema.js';
import type { Environment } from '../config/cross-field-rules.js';
import type { Principal } from './authenticator.js';

/** The id of the project's own application, which the project keys identify. */
export const projectApplicationId = 'project';

interface Entry {
  digest: Buffer;
  principal: Principal;
}

const digest = (key: string) => createHash('sha256').update(key, 'utf8').digest();

/**
 * The API keys valid in this environment, each mapped to the principal it identifies. Lookups compare
 * fixed-length digests in constant time and visit every key, so timing tells nothing about a key.
 */
export class KeyRing {
  private readonly entries: Entry[];

  constructor(config: Readonly<Config>, environment: Environment) {
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
    const candidateDigest = digest(candidate);
    let found: Principal | null = null;
    for (const entry of this.entries) {
      if (timingSafeEqual(entry.digest, candidateDigest)) found = entry.principal;
    }
    return found;
  }
}
