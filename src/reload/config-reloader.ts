import { ConfigError } from '../kit/config-error.js';
import { SerialRuns } from '../kit/serial-runs.js';
import type { Logger } from '../observe/log.js';
import type { Metrics } from '../observe/metrics.js';

/** What a reload did: applied (with the settings that wait for a restart), or refused and why. */
export type ReloadOutcome = { applied: true; kept: string[] } | { applied: false; problems: string[] };

/** A config read, validated and built, ready to be put in force. */
export interface PreparedReload {
  /** The settings whose new value waits for a restart. */
  kept: string[];
  /** Puts it in force; called only once everything that can fail has succeeded. */
  commit(): Promise<void> | void;
}

export interface ConfigReloaderParts {
  /**
   * Reads conf/ again, validates it and builds what it needs (the authenticator, a plugin's), putting
   * nothing in force yet.
   * @throws ConfigError listing every mistake.
   */
  prepare(): Promise<PreparedReload>;
  logger: Logger;
  metrics: Pick<Metrics, 'configReloads' | 'configLastReloadSuccessful'>;
}

/**
 * Reloads of the config, one at a time: a config with any mistake is refused whole and the running one
 * stays. Asking again while a reload waits to start joins it (it will read the files as they are then).
 */
export class ConfigReloader {
  private readonly runs = new SerialRuns(() => this.attempt());

  constructor(private readonly parts: ConfigReloaderParts) {}

  reload(): Promise<ReloadOutcome> {
    return this.runs.run();
  }

  private async attempt(): Promise<ReloadOutcome> {
    const { logger, metrics } = this.parts;
    let outcome: ReloadOutcome;
    try {
      const prepared = await this.parts.prepare();
      await prepared.commit();
      outcome = { applied: true, kept: prepared.kept };
    } catch (error) {
      const problems =
        error instanceof ConfigError ? [...error.problems] : [(error as Error).message ?? String(error)];
      outcome = { applied: false, problems };
    }
    metrics.configReloads.inc({ result: outcome.applied ? 'applied' : 'refused' });
    metrics.configLastReloadSuccessful.set(outcome.applied ? 1 : 0);
    if (!outcome.applied) {
      logger.error({ problems: outcome.problems }, 'config reload refused: the running config stays');
      return outcome;
    }
    if (outcome.kept.length > 0) {
      logger.warn(
        { kept: outcome.kept },
        'these settings cannot change while the gateway runs: restart to apply them',
      );
    }
    logger.info('config reloaded');
    return outcome;
  }
}
