import { sharedIdProblems } from '../applications/application-directory.js';
import type { ApplicationRepository } from '../applications/application-repository.js';
import { ConfigError } from '../kit/config-error.js';
import type { LoadedConfig } from '../config/load-config.js';
import type { Logger } from '../observe/log.js';
import { planDeclaredQuotas } from '../quota/declared-quotas.js';
import type { QuotaRepository } from '../quota/quota-repository.js';

/**
 * What a reload of the process that owns the stores (a gateway of one process, or a primary) checks
 * against them before anything changes, and writes into them when it commits: the declared quotas,
 * and the applications of conf/ against those made through the admin API. A worker owns none: null.
 * @throws ConfigError when the config cannot go with what the stores hold
 */
export function planStoreChanges(
  next: LoadedConfig,
  stores: { quotas: QuotaRepository; applications: ApplicationRepository } | null,
): { apply(logger: Logger): Promise<void> } {
  if (!stores) return { apply: () => Promise.resolve() };
  const declared = planDeclaredQuotas(stores.quotas, next.config);
  const shared = sharedIdProblems(next.config.applications, stores.applications.all());
  if (shared.length > 0) throw new ConfigError(shared);
  return declared;
}
